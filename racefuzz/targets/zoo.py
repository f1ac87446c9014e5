"""The model zoo: built-ins shaped like the models EPs are written for, not toy MLPs.

Each builder returns a graph; `models` wraps it into a model (opset 17, IR 8, plus version 1 of
any other domain its nodes use), caches and runs it like every other built-in. Weights come from
fixed seeds, so two builds are byte-identical; tests/test_zoo.py checks each one's outputs
against numpy.

- `lngelu`: X + MLP(LayerNormalization(X)) with an erf GELU, X [4,16,64]: a transformer block's
  feed-forward half;
- `einsum`: three Einsums (projection, batched scores, batched mix-back), X [4,16,32];
- `matmulnbits`: com.microsoft MatMulNBits, 4-bit blocks of 32 with scales, zero points and
  bias, A [4,64], K 64, N 32: the op quantised LLMs run on;
- `attention`: causal 4-head self-attention from basic ops, X [2,16,32];
- `dynamic`: LayerNorm, MatMul, Softmax, ReduceMean over X ["batch","seq",32], shape-generic,
  so a run may feed other dims than 1;
- `large`: Relu(X·W + B) * C, X [256,2048], W [2048,2048] (16 MiB): big enough that kernels
  take their tiled, multi-threaded paths.

Runs in worker processes like `models`: the standard library, numpy and (lazily) onnx only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

ZOO: tuple[str, ...] = ("lngelu", "einsum", "matmulnbits", "attention", "dynamic", "large")
MS_DOMAIN = "com.microsoft"
Array = np.ndarray[Any, Any]

_NBITS_K, _NBITS_N, _NBITS_BLOCK = 64, 32, 32
_HEADS = 4


def _dense(rng: np.random.Generator, rows: int, cols: int) -> Array:
    # Scaled by fan-in, as in `models`: activations stay near unit size.
    w: Array = rng.standard_normal((rows, cols)) / np.sqrt(rows)
    return w.astype(np.float32)


def _small(rng: np.random.Generator, *shape: int) -> Array:
    v: Array = 0.1 * rng.standard_normal(shape)
    return v.astype(np.float32)


def _graph(
    name: str,
    nodes: list[onnx.NodeProto],
    inputs: Mapping[str, list[int | str]],
    outputs: Mapping[str, list[int | str]],
    inits: Mapping[str, Array],
) -> onnx.GraphProto:
    from onnx import TensorProto, helper, numpy_helper

    def info(values: Mapping[str, list[int | str]]) -> list[onnx.ValueInfoProto]:
        return [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in values.items()]

    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    return helper.make_graph(nodes, name, info(inputs), info(outputs), tensors)


def _layer_norm(
    x: str, out: str, width: int, rng: np.random.Generator
) -> tuple[onnx.NodeProto, dict[str, Array]]:
    from onnx import helper

    inits = {
        f"{out}_g": (1.0 + _small(rng, width)).astype(np.float32),
        f"{out}_b": _small(rng, width),
    }
    node = helper.make_node(
        "LayerNormalization", [x, f"{out}_g", f"{out}_b"], [out], axis=-1, epsilon=1e-5
    )
    return node, inits


# --- builders ---------------------------------------------------------------------------------


def lngelu() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(11)
    ln, inits = _layer_norm("X", "ln", 64, rng)
    inits |= {
        "W1": _dense(rng, 64, 128),
        "B1": _small(rng, 128),
        "W2": _dense(rng, 128, 64),
        "B2": _small(rng, 64),
        "half": np.array(0.5, np.float32),
        "one": np.array(1.0, np.float32),
        "sqrt2": np.array(np.sqrt(2.0), np.float32),
    }
    # GELU as the erf formula from default-domain ops rather than com.microsoft Gelu (which
    # ORT's CPU EP has): every EP that takes standard ops may claim it, the model stays plain
    # opset 17, and ORT's own optimizer fuses it into com.microsoft Gelu, so an optimized and
    # an unoptimized session run different kernels on the same math.
    nodes = [
        ln,
        helper.make_node("MatMul", ["ln", "W1"], ["h1"]),
        helper.make_node("Add", ["h1", "B1"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]),
        helper.make_node("Mul", ["he", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "W2"], ["o1"]),
        helper.make_node("Add", ["o1", "B2"], ["o"]),
        helper.make_node("Add", ["X", "o"], ["Y"]),  # the residual
    ]
    return _graph("lngelu", nodes, {"X": [4, 16, 64]}, {"Y": [4, 16, 64]}, inits)


def einsum() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(12)
    inits = {"W": _dense(rng, 32, 32), "scale": np.array(1 / np.sqrt(32), np.float32)}
    nodes = [
        helper.make_node("Einsum", ["X", "W"], ["P"], equation="btd,de->bte"),
        helper.make_node("Einsum", ["P", "X"], ["S0"], equation="bid,bjd->bij"),
        helper.make_node("Mul", ["S0", "scale"], ["S"]),
        helper.make_node("Einsum", ["S", "P"], ["Y"], equation="bij,bjk->bik"),
    ]
    return _graph("einsum", nodes, {"X": [4, 16, 32]}, {"Y": [4, 16, 32]}, inits)


def matmulnbits() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(13)
    k, n, block = _NBITS_K, _NBITS_N, _NBITS_BLOCK
    blocks = k // block
    q = rng.integers(0, 16, (n, blocks, block), dtype=np.uint8)
    zero = rng.integers(6, 11, (n, blocks), dtype=np.uint8)
    inits: dict[str, Array] = {
        # Two 4-bit values a byte, the first in the low nibble (the op's documented packing).
        "B": (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8),
        "scales": rng.uniform(0.02, 0.06, (n, blocks)).astype(np.float32),
        "zero_points": _pack_nibbles(zero),
        "bias": _small(rng, n),
    }
    node = helper.make_node(
        "MatMulNBits",
        ["A", "B", "scales", "zero_points", "", "bias"],
        ["Y"],
        domain=MS_DOMAIN,
        K=k,
        N=n,
        bits=4,
        block_size=block,
    )
    return _graph("matmulnbits", [node], {"A": [4, k]}, {"Y": [4, n]}, inits)


def _pack_nibbles(values: Array) -> Array:
    """(N, blocks) 4-bit values -> (N, ceil(blocks / 2)) bytes, low nibble first."""
    rows, cols = values.shape
    padded = np.zeros((rows, cols + cols % 2), np.uint8)
    padded[:, :cols] = values
    packed: Array = padded[:, 0::2] | (padded[:, 1::2] << 4)
    return packed.astype(np.uint8)


def attention() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(14)
    t, d = 16, 32
    inits = {f"W{c}": _dense(rng, d, d) for c in "qkvo"}
    inits |= {
        "Bo": _small(rng, d),
        "heads": np.array([0, 0, _HEADS, d // _HEADS], np.int64),  # 0: keep that dim
        "merged": np.array([0, 0, d], np.int64),
        "scale": np.array(1 / np.sqrt(d // _HEADS), np.float32),
        # Added before Softmax: -1e9 above the diagonal leaves exp() exactly 0 there.
        "causal": np.triu(np.full((t, t), -1e9, np.float32), k=1),
    }
    mm = helper.make_node
    nodes = [mm("MatMul", ["X", f"W{c}"], [c]) for c in "qkv"]
    for c in "qkv":
        nodes.append(mm("Reshape", [c, "heads"], [f"{c}4"]))
    nodes += [
        mm("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        mm("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        mm("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        mm("MatMul", ["qh", "kt"], ["s0"]),
        mm("Mul", ["s0", "scale"], ["s1"]),
        mm("Add", ["s1", "causal"], ["s"]),
        mm("Softmax", ["s"], ["p"], axis=-1),
        mm("MatMul", ["p", "vh"], ["ctx"]),
        mm("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
        mm("Reshape", ["ct", "merged"], ["cm"]),
        mm("MatMul", ["cm", "Wo"], ["o"]),
        mm("Add", ["o", "Bo"], ["Y"]),
    ]
    return _graph("attention", nodes, {"X": [2, t, d]}, {"Y": [2, t, d]}, inits)


def dynamic() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(15)
    ln, inits = _layer_norm("X", "ln", 32, rng)
    inits |= {"W": _dense(rng, 32, 16)}
    nodes = [
        ln,
        helper.make_node("MatMul", ["ln", "W"], ["m"]),
        helper.make_node("Softmax", ["m"], ["p"], axis=-1),
        # Opset 17's ReduceMean takes its axes as an attribute (an input from opset 18).
        helper.make_node("ReduceMean", ["p"], ["Y"], axes=[1], keepdims=0),
    ]
    x: list[int | str] = ["batch", "seq", 32]
    return _graph("dynamic", nodes, {"X": x}, {"Y": ["batch", 16]}, inits)


def large() -> onnx.GraphProto:
    from onnx import helper

    rng = np.random.default_rng(16)
    width = 2048
    inits = {
        "W": _dense(rng, width, width),
        "B": _small(rng, width),
        "C": rng.uniform(0.5, 2.0, width).astype(np.float32),
    }
    # The testbed's four ops only, so the testbed EP takes the whole graph.
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Mul", ["r", "C"], ["Y"]),
    ]
    return _graph("large", nodes, {"X": [256, width]}, {"Y": [256, width]}, inits)


BUILDERS: Mapping[str, Callable[[], onnx.GraphProto]] = {
    "lngelu": lngelu,
    "einsum": einsum,
    "matmulnbits": matmulnbits,
    "attention": attention,
    "dynamic": dynamic,
    "large": large,
}
