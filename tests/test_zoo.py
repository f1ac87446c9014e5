"""The model zoo on real onnxruntime: deterministic builds, specs, numpy references, dynamic
dims, tolerances and how a user picks the zoo (`models = ["zoo"]`, `--models`)."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from racefuzz.cli import resume_options
from racefuzz.cli.main import build_parser
from racefuzz.errors import RacefuzzError
from racefuzz.targets import models
from racefuzz.targets.config import Reader
from racefuzz.targets.models import ZOO
from racefuzz.targets.registry import load_target, with_models
from racefuzz.worker.base import ATOL, MODEL_TOLERANCE, RTOL, model_tolerance

Array = np.ndarray[Any, Any]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # One cache for the module: `large` is 16 MiB, written once.
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("cache")
        mp.setenv("RACEFUZZ_CACHE", str(folder))
        yield folder


def weights(name: str) -> dict[str, Array]:
    model = onnx.load(str(models.model_path(name)))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def cpu_session(name: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(
        str(models.model_path(name)), sess_options=so, providers=["CPUExecutionProvider"]
    )


# --- numpy references, from each model's own initializers (float64) -----------------------------


def layer_norm(x: Array, g: Array, b: Array) -> Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Array = (x - mean) / np.sqrt(var + 1e-5) * g + b
    return out


def softmax(x: Array) -> Array:
    e = np.exp(x - x.max(-1, keepdims=True))
    out: Array = e / e.sum(-1, keepdims=True)
    return out


def ref_lngelu(w: dict[str, Array], x: Array) -> Array:
    h = layer_norm(x, w["ln_g"], w["ln_b"]) @ w["W1"] + w["B1"]
    gelu = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    out: Array = x + gelu @ w["W2"] + w["B2"]
    return out


def ref_einsum(w: dict[str, Array], x: Array) -> Array:
    p = np.einsum("btd,de->bte", x, w["W"])
    s = np.einsum("bid,bjd->bij", p, x) * w["scale"]
    out: Array = np.einsum("bij,bjk->bik", s, p)
    return out


def unpack_nibbles(packed: Array, count: int) -> Array:
    """The last axis of bytes -> `count` 4-bit values, low nibble first."""
    both = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)
    out: Array = both[..., :count].astype(np.float64)
    return out


def ref_matmulnbits(w: dict[str, Array], a: Array) -> Array:
    n, blocks, _ = w["B"].shape
    q = unpack_nibbles(w["B"], 32)  # (N, blocks, 32)
    zero = unpack_nibbles(w["zero_points"], blocks)  # (N, blocks)
    dequant = (q - zero[..., None]) * w["scales"][..., None]
    out: Array = a @ dequant.reshape(n, -1).T + w["bias"]
    return out


def ref_attention(w: dict[str, Array], x: Array) -> Array:
    b, t, d = x.shape

    def heads(m: Array) -> Array:
        out: Array = m.reshape(b, t, 4, d // 4).transpose(0, 2, 1, 3)
        return out

    q, k, v = (heads(x @ w[f"W{c}"]) for c in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // 4)
    scores = np.where(np.triu(np.ones((t, t), bool), k=1), -np.inf, scores)
    ctx = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    out: Array = ctx @ w["Wo"] + w["Bo"]
    return out


def ref_dynamic(w: dict[str, Array], x: Array) -> Array:
    p = softmax(layer_norm(x, w["ln_g"], w["ln_b"]) @ w["W"])
    out: Array = p.mean(axis=1)
    return out


def ref_large(w: dict[str, Array], x: Array) -> Array:
    out: Array = np.maximum(x @ w["W"] + w["B"], 0) * w["C"]
    return out


REFERENCES: dict[str, Callable[[dict[str, Array], Array], Array]] = {
    "lngelu": ref_lngelu,
    "einsum": ref_einsum,
    "matmulnbits": ref_matmulnbits,
    "attention": ref_attention,
    "dynamic": ref_dynamic,
    "large": ref_large,
}


def assert_within(name: str, actual: Array, expected: Array) -> None:
    rtol, atol = model_tolerance(name, RTOL, ATOL)  # what the worker holds the model to
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# --- building -----------------------------------------------------------------------------------


def test_the_zoo_follows_the_old_builtins_and_leaves_the_default_models_alone() -> None:
    assert ("tiny", "mlp", "wide", "conv", "eltwise", "tail", *ZOO) == models.BUILTIN
    assert models.DEFAULT_MODELS == ("tiny", "mlp", "wide", "conv", "eltwise")
    assert load_target("cpu").models == models.DEFAULT_MODELS
    assert set(REFERENCES) == set(ZOO) == set(MODEL_TOLERANCE)


@pytest.mark.parametrize("name", ZOO)
def test_each_zoo_model_builds_byte_identical_and_checks_clean(name: str) -> None:
    data = models.model_bytes(name)
    assert data == models.model_bytes(name)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)  # it skips com.microsoft ops
    imports = [(o.domain, o.version) for o in model.opset_import]
    assert imports == [("", 17)] + [("com.microsoft", 1)] * (name == "matmulnbits")
    assert model.ir_version == models.IR_VERSION
    assert len(data) < 20_000_000


@pytest.mark.parametrize("name", ZOO)
def test_builtin_specs_match_what_onnx_and_ort_read_from_the_file(name: str) -> None:
    from_file = models.input_specs(models.model_path(name))
    from_ort = [
        models.input_spec_from_ort(i.name, i.shape, i.type) for i in cpu_session(name).get_inputs()
    ]
    built_in = models.input_specs(name)
    assert built_in == from_file == from_ort
    symbols = [[s.symbols for s in specs] for specs in (built_in, from_file, from_ort)]
    assert symbols[0] == symbols[1] == symbols[2]


def test_only_dynamic_has_symbolic_dims() -> None:
    (spec,) = models.input_specs("dynamic")
    assert (spec.shape, spec.symbols) == ((1, 1, 32), ("batch", "seq", None))
    assert all(not s.symbols for n in ZOO if n != "dynamic" for s in models.input_specs(n))


# --- running against numpy ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ZOO)
def test_each_zoo_model_matches_its_numpy_reference_on_the_cpu_ep(name: str) -> None:
    session, w = cpu_session(name), weights(name)
    for seed in (0, 1):
        feeds = models.random_inputs(models.input_specs(name), seed)
        (x,) = feeds.values()
        (y,) = session.run(None, feeds)
        assert np.all(np.isfinite(y)) and np.any(y)
        assert_within(name, y, REFERENCES[name](w, x.astype(np.float64)))


@pytest.mark.parametrize("dims", [{"batch": 3, "seq": 5}, {"batch": 2, "seq": 37}])
def test_dynamic_takes_other_dims_each_run(dims: dict[str, int]) -> None:
    specs = models.input_specs("dynamic")
    feeds = models.random_inputs(specs, 4, dims)
    assert feeds["X"].shape == (dims["batch"], dims["seq"], 32)
    (y,) = cpu_session("dynamic").run(None, feeds)
    assert y.shape == (dims["batch"], 16)
    assert_within("dynamic", y, ref_dynamic(weights("dynamic"), feeds["X"].astype(np.float64)))


def test_random_inputs_without_dims_are_as_before_and_bad_dims_are_one_line() -> None:
    specs = models.input_specs("dynamic")
    plain = models.random_inputs(specs, 9)["X"]
    assert plain.shape == (1, 1, 32)
    np.testing.assert_array_equal(plain, models.random_inputs(specs, 9, {})["X"])
    with pytest.raises(RacefuzzError, match=r"^no input has a symbolic dim 'time' \(symbolic"):
        models.random_inputs(specs, 9, {"time": 4})
    with pytest.raises(RacefuzzError, match=r"^dim 'seq' must be a positive integer, not 0$"):
        models.random_inputs(specs, 9, {"seq": 0})


def test_input_spec_from_ort_records_symbol_names() -> None:
    spec = models.input_spec_from_ort("X", ["batch", None, 5], "tensor(float)")
    assert (spec.shape, spec.symbols) == ((1, 1, 5), ("batch", None, None))
    assert models.input_spec_from_ort("X", [2, 5], "tensor(float)").symbols == ()


# --- tolerances ---------------------------------------------------------------------------------


def test_tolerances_come_from_the_worker_table_and_only_widen() -> None:
    assert models.tolerance("large") == MODEL_TOLERANCE["large"]
    assert models.tolerance("mlp") is None
    assert model_tolerance("mlp", 1e-3, 2e-3) == (1e-3, 2e-3)
    assert model_tolerance("large", 1e-7, 1e-2) == (MODEL_TOLERANCE["large"][0], 1e-2)


# --- picking the zoo ----------------------------------------------------------------------------


def test_models_zoo_on_the_command_line_and_in_a_config(tmp_path: Path) -> None:
    args = build_parser().parse_args(["doctor", "--target", "cpu", "--models", "zoo,tiny,large"])
    assert args.models == ",".join((*ZOO, "tiny"))
    target = with_models(load_target("cpu"), args.models)
    assert target.models == (*ZOO, "tiny")
    assert with_models(target, None) is target
    config = tmp_path / "racefuzz.toml"
    config.write_text('[targets.t]\nmodels = ["lngelu", "zoo"]\n[targets.t.profiles.p]\nep = "E"\n')
    reader = Reader(config)
    assert reader.target("t", reader.targets()["t"]).models == ZOO


def test_models_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.onnx").write_bytes(models.model_bytes("tiny"))
    monkeypatch.chdir(tmp_path)
    assert models.chosen("m.onnx, mlp") == (str(tmp_path / "m.onnx"), "mlp")


def test_a_bogus_model_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", "cpu", "--models", "bogus"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("racefuzz: error: unknown model 'bogus' (built-in models: ")
    assert "zoo for every zoo model" in proc.stderr


def settled(folder: Path, header: dict[str, Any], *argv: str) -> argparse.Namespace:
    (folder / "findings.json").write_text(json.dumps({**header, "findings": []}))
    args = build_parser().parse_args(["run", "--resume", str(folder), *argv])
    resume_options.settle(args)
    return args


def test_a_resume_keeps_the_campaigns_models_or_says_what_overrides_them(tmp_path: Path) -> None:
    assert settled(tmp_path, {"models": "lngelu,large"}).models == "lngelu,large"
    assert settled(tmp_path, {}).models is None  # a campaign on the target's own models
    args = settled(tmp_path, {"models": "lngelu,large"}, "--models", "tiny")
    assert args.models == "tiny"
    assert args.resumed.overrides == ["--models tiny overrides the campaign's lngelu,large"]
