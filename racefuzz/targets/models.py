"""Models to run: the small built-in ONNX models, the model cache, input specs and inputs.

The built-ins are generated with the `onnx` helper API (opset 17, float32, weights from fixed
seeds as initializers), so every process builds byte-identical models:
- `tiny`: Relu(X·W + B), X [2,8]; the smallest thing that exercises an EP;
- `mlp`: (Relu(X·W1 + B1)·W2 + B2) * C, X [4,32], hidden 64, output 16;
- `wide`: the same graph with X [64,256], hidden 512, so compute takes measurable time;
- `conv`: Conv, Relu, MaxPool, Conv, Relu, GlobalAveragePool, Flatten, Gemm on [1,3,16,16];
- `eltwise`: Tanh(X * Z + X) + Sigmoid(Relu(Z)), X and Z [64,256] inputs, no initializers:
  element-wise ops only, for EPs that take no MatMul (nxrt-ep-cuda 0.1.0.dev6 takes this whole);
- the zoo (`ZOO`, built in `zoo`): real model shapes, ops and sizes; `dynamic` has symbolic dims
  (`InputSpec.symbols`), which `random_inputs` may set. Each has a measured tolerance
  (`tolerance`). docs/models.md describes them all.
The MLPs use MatMul, Add, Relu and Mul only, the ops the testbed EP computes; the bias and the
constant C are both row vectors, so one broadcast pattern covers them. Only `tiny` ends in a
Relu; the others' outputs are never legitimately all zeros, which keeps the `zeroed` oracle sharp.

A built-in is written once into `$RACEFUZZ_CACHE/models/` (default `~/.cache/racefuzz/models/`)
as `<name>-v<MODEL_VERSION>-<sha256 prefix>.onnx`, atomically (temp file, then `os.replace`), so
processes may race to write it. A cached file is found and checked by its hash without importing
`onnx`: worker processes start often, and `import onnx` costs more than half a second.

Input specs and random inputs live in `inputs`, re-exported here. This module runs inside
worker processes: it imports only the standard library, numpy, (lazily) onnx and the worker's
tolerance table. It knows nothing of ORT, EPs or targets.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError
from racefuzz.targets import zoo
from racefuzz.targets.inputs import InputSpec as InputSpec
from racefuzz.targets.inputs import input_spec_from_ort as input_spec_from_ort
from racefuzz.targets.inputs import random_inputs as random_inputs
from racefuzz.targets.inputs import spec_of
from racefuzz.targets.zoo import ZOO as ZOO
from racefuzz.worker.base import MODEL_TOLERANCE

if TYPE_CHECKING:
    import onnx

# Smallest (simplest to read in a report) first; the shrinker prefers earlier names. `conv`
# comes last although `wide` computes more: it brings ops a reader of an MLP report needn't know.
# The zoo comes after `tail`: a target's default models stay as they were.
BUILTIN: tuple[str, ...] = ("tiny", "mlp", "wide", "conv", "eltwise", "tail", *ZOO)
# A target's models unless it names them: `tail` only serves as the second session of a `feed`.
DEFAULT_MODELS: tuple[str, ...] = ("tiny", "mlp", "wide", "conv", "eltwise")
# What a target's `models` (and `--models`) may say for every zoo model at once.
ZOO_ALIAS = "zoo"
# Bump when a builder changes, so caches never serve an old definition under a current name.
MODEL_VERSION = 2
OPSET = 17
IR_VERSION = 8  # what opset 17 needs; onnxruntime 1.31 reads up to IR 11
_HASH_CHARS = 16


# --- building ---------------------------------------------------------------------------------


def _dense(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    # Scaled by fan-in so activations stay near unit size through the layers.
    w: np.ndarray = rng.standard_normal((rows, cols)) / np.sqrt(rows)
    return w.astype(np.float32)


def _mlp_graph(name: str, batch: int, width: int, hidden: int, out: int, seed: int) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = {
        "W1": _dense(rng, width, hidden),
        "B1": (0.1 * rng.standard_normal(hidden)).astype(np.float32),
        "W2": _dense(rng, hidden, out),
        "B2": (0.1 * rng.standard_normal(out)).astype(np.float32),
        "C": rng.uniform(0.5, 2.0, out).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["X", "W1"], ["h1"]),
        helper.make_node("Add", ["h1", "B1"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["h3"]),
        helper.make_node("MatMul", ["h3", "W2"], ["h4"]),
        helper.make_node("Add", ["h4", "B2"], ["h5"]),
        helper.make_node("Mul", ["h5", "C"], ["Y"]),
    ]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, width])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, out])
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    return _finish(helper.make_graph(nodes, name, [x], [y], tensors))


def _tiny() -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w, b = _dense(rng, 8, 4), (0.1 * rng.standard_normal(4)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["a"]),
        helper.make_node("Relu", ["a"], ["Y"]),
    ]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])
    tensors = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    return _finish(helper.make_graph(nodes, "tiny", [x], [y], tensors))


def _conv() -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)

    def kernel(out_c: int, in_c: int) -> np.ndarray:
        w: np.ndarray = rng.standard_normal((out_c, in_c, 3, 3)) / np.sqrt(in_c * 9)
        return w.astype(np.float32)

    inits = {
        "K1": kernel(8, 3),
        "KB1": (0.1 * rng.standard_normal(8)).astype(np.float32),
        "K2": kernel(16, 8),
        "KB2": (0.1 * rng.standard_normal(16)).astype(np.float32),
        "G": _dense(rng, 16, 10),
        "GB": (0.1 * rng.standard_normal(10)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["X", "K1", "KB1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "K2", "KB2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "G", "GB"], ["Y"]),
    ]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 10])
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    return _finish(helper.make_graph(nodes, "conv", [x], [y], tensors))


def _eltwise() -> bytes:
    from onnx import TensorProto, helper

    # Both operands are graph inputs: nxrt-ep-cuda 0.1.0.dev6 takes a graph only if it takes
    # every node, and it takes no node that reads an initializer (bench/results/gpu.md).
    nodes = [
        helper.make_node("Mul", ["X", "Z"], ["m"]),
        helper.make_node("Add", ["m", "X"], ["a"]),
        helper.make_node("Tanh", ["a"], ["t"]),
        helper.make_node("Relu", ["Z"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["g"]),
        helper.make_node("Add", ["t", "g"], ["Y"]),
    ]
    x, z = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 256]) for n in "XZ")
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [64, 256])
    return _finish(helper.make_graph(nodes, "eltwise", [x, z], [y]))


def _tail() -> bytes:
    from onnx import TensorProto, helper

    # Any 2-D shape: the second session of a `feed` step takes another model's output as is.
    nodes = [
        helper.make_node("Relu", ["X"], ["r"]),
        helper.make_node("Mul", ["X", "X"], ["m"]),
        helper.make_node("Add", ["r", "m"], ["Y"]),
    ]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", "M"])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", "M"])
    return _finish(helper.make_graph(nodes, "tail", [x], [y]))


def _finish(graph: onnx.GraphProto) -> bytes:
    import onnx
    from onnx import helper

    # Version 1 of any other domain a node uses (com.microsoft for the zoo's MatMulNBits); the
    # checker skips ops of domains it does not know, and ORT needs the import to find them.
    others = sorted({n.domain for n in graph.node} - {"", "ai.onnx"})
    model = helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", OPSET),
            *(helper.make_opsetid(d, 1) for d in others),
        ],
        ir_version=IR_VERSION,
        producer_name="racefuzz",
    )
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString(deterministic=True))


def _zoo_model(name: str) -> bytes:
    return _finish(zoo.BUILDERS[name]())


_BUILDERS: Mapping[str, Callable[[], bytes]] = {
    "tiny": _tiny,
    "mlp": functools.partial(_mlp_graph, "mlp", 4, 32, 64, 16, 2),
    "wide": functools.partial(_mlp_graph, "wide", 64, 256, 512, 16, 3),
    "conv": _conv,
    "eltwise": _eltwise,
    "tail": _tail,
    **{name: functools.partial(_zoo_model, name) for name in ZOO},
}
# Known without onnx (worker processes); a test checks it against the built models. A str dim
# is a symbolic one, fed as 1 unless `random_inputs` is told otherwise.
_BUILTIN_SPECS: Mapping[str, dict[str, tuple[int | str, ...]]] = {
    "tiny": {"X": (2, 8)},
    "mlp": {"X": (4, 32)},
    "wide": {"X": (64, 256)},
    "conv": {"X": (1, 3, 16, 16)},
    "eltwise": {"X": (64, 256), "Z": (64, 256)},
    "tail": {"X": ("N", "M")},
    "lngelu": {"X": (4, 16, 64)},
    "einsum": {"X": (4, 16, 32)},
    "matmulnbits": {"A": (4, 64)},
    "attention": {"X": (2, 16, 32)},
    "dynamic": {"X": ("batch", "seq", 32)},
    "large": {"X": (256, 2048)},
}


# --- finding models ---------------------------------------------------------------------------


def cache_dir() -> Path:
    return cache_root() / "models"


def _unknown(name: str, listed: bool = False) -> RacefuzzError:
    known = ", ".join(BUILTIN) + (f"; {ZOO_ALIAS} for every zoo model" if listed else "")
    return RacefuzzError(
        f"unknown model '{name}' (built-in models: {known}; or give a path to an .onnx file)"
    )


def model_bytes(name_or_path: str | Path) -> bytes:
    """The serialised model: built fresh for a built-in name, read from disk for a path."""
    if isinstance(name_or_path, str) and name_or_path in _BUILDERS:
        return _BUILDERS[name_or_path]()
    return model_path(name_or_path).read_bytes()


def model_path(name_or_path: str | Path) -> Path:
    """A file to load: a built-in is cached (written once); a user path is checked and returned.

    A built-in name wins over a file of the same name in the current folder.
    """
    if isinstance(name_or_path, str) and name_or_path in _BUILDERS:
        key = (name_or_path, cache_dir())
        hit = _memo.get(key)
        if hit is None or not hit.is_file():
            hit = _memo[key] = _cached(*key)
        return hit
    path = Path(name_or_path)
    if path.is_file():
        return path
    text = str(name_or_path)
    if path.exists():
        raise RacefuzzError(f"model '{text}' is not a file")
    if _path_like(text):
        raise RacefuzzError(f"model '{text}' not found")
    raise _unknown(text)


def _path_like(text: str) -> bool:
    return Path(text).suffix.lower() == ".onnx" or "/" in text or "\\" in text


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


_memo: dict[tuple[str, Path], Path] = {}  # saves hashing the file on every call


def _cached(name: str, folder: Path) -> Path:
    # Look first: a file whose bytes hash to its own name is the model, and no onnx is needed.
    prefix = f"{name}-v{MODEL_VERSION}-"
    for found in sorted(folder.glob(f"{prefix}*.onnx")):
        try:
            if found.name == f"{prefix}{_digest(found.read_bytes())}.onnx":
                return found
        except OSError:
            continue  # removed or replaced under us; fall through and write our own
    data = _BUILDERS[name]()
    dest = folder / f"{prefix}{_digest(data)}.onnx"
    _write_atomically(dest, data)
    return dest


def _write_atomically(dest: Path, data: bytes) -> None:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.stem}-", suffix=".tmp")
    except OSError as e:
        raise RacefuzzError(f"cannot write model cache '{dest.parent}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, dest)
    except OSError:
        # On Windows a replace onto a file another process holds open fails; that process
        # wrote the same bytes, so its file serves us too.
        if not dest.is_file():
            raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def has_symbolic_dims(name_or_path: str) -> bool:
    """Whether a model's inputs name a dim a run may size (`Step.dims`); an unreadable model
    has none here (loading it reports why)."""
    try:
        return any(spec.symbols for spec in input_specs(name_or_path))
    except RacefuzzError:
        return False


def size_rank(name_or_path: str) -> int:
    """Order for shrinking: built-ins by `BUILTIN` order, then user models by file size."""
    if name_or_path in BUILTIN:
        return BUILTIN.index(name_or_path)
    try:
        return len(BUILTIN) + os.path.getsize(name_or_path)
    except OSError:
        return len(BUILTIN)


def expand(names: Sequence[str]) -> tuple[str, ...]:
    """Model names as a target lists them, with `zoo` standing for every zoo model; each once."""
    out: list[str] = []
    for name in names:
        for one in ZOO if name == ZOO_ALIAS else (name,):
            if one not in out:
                out.append(one)
    return tuple(out)


def chosen(text: str) -> tuple[str, ...]:
    """`--models a,b,...` checked: built-in names, `zoo`, and paths to .onnx files (made
    absolute, so a resumed campaign finds them from any folder); each once, in order."""
    out: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if item in _BUILDERS or item == ZOO_ALIAS:
            out += expand([item])
        elif item and not Path(item).exists() and not _path_like(item):
            raise _unknown(item, listed=True)
        elif item:
            out.append(str(model_path(item).resolve()))
    if not out:
        raise RacefuzzError("--models needs at least one model name or .onnx path")
    return tuple(dict.fromkeys(out))


def tolerance(name: str) -> tuple[float, float] | None:
    """(rtol, atol) a built-in's outputs are held to against ORT's CPU EP; None: the worker's
    defaults. The worker takes the larger of this and the target's own."""
    return MODEL_TOLERANCE.get(name)


# --- inputs -----------------------------------------------------------------------------------


def input_specs(name_or_path: str | Path) -> list[InputSpec]:
    """The graph inputs that are not initializers, read with onnx (a built-in needs no onnx)."""
    if isinstance(name_or_path, str) and name_or_path in _BUILTIN_SPECS:
        f32 = np.dtype(np.float32)
        return [spec_of(k, dims, f32) for k, dims in _BUILTIN_SPECS[name_or_path].items()]
    path = model_path(name_or_path)
    import onnx
    from onnx import helper

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # onnx raises DecodeError and friends; any of them means "unreadable"
        raise RacefuzzError(f"model '{path}' is not a readable ONNX file ({e})") from None
    initializers = {t.name for t in model.graph.initializer}
    out: list[InputSpec] = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        if not value.type.HasField("tensor_type"):
            raise RacefuzzError(f"model '{path}': input '{value.name}' is not a tensor")
        tensor = value.type.tensor_type
        dims = [
            d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in tensor.shape.dim
        ]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        out.append(spec_of(value.name, dims, dtype))
    return out
