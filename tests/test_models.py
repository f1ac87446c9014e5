"""Built-in models run on real onnxruntime; the cache, input specs and inputs behave."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from racefuzz.errors import RacefuzzError
from racefuzz.targets import models
from racefuzz.targets.models import BUILTIN, InputSpec


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RACEFUZZ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def op_types(name: str) -> set[str]:
    return {n.op_type for n in onnx.load_from_string(models.model_bytes(name)).graph.node}


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_model_runs_on_the_cpu_ep_with_finite_nonzero_outputs(name: str) -> None:
    session = ort.InferenceSession(str(models.model_path(name)), providers=["CPUExecutionProvider"])
    outputs = session.run(None, models.random_inputs(models.input_specs(name), seed=7))
    assert len(outputs) == 1
    assert np.all(np.isfinite(outputs[0]))
    assert np.any(outputs[0])


def test_the_mlps_use_only_the_ops_the_testbed_computes() -> None:
    assert op_types("tiny") == {"MatMul", "Add", "Relu"}
    assert op_types("mlp") == op_types("wide") == {"MatMul", "Add", "Relu", "Mul"}
    assert {"Conv", "MaxPool", "GlobalAveragePool", "Gemm"} <= op_types("conv")


def test_builtin_models_are_opset_17_and_check_clean() -> None:
    for name in BUILTIN:
        model = onnx.load_from_string(models.model_bytes(name))
        onnx.checker.check_model(model, full_check=True)
        extra = [("com.microsoft", 1)] if name == "matmulnbits" else []  # a contrib op
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 17), *extra]


def test_builtin_models_are_byte_identical_across_builds() -> None:
    for name in BUILTIN:
        assert models.model_bytes(name) == models.model_bytes(name)


def test_wide_is_the_biggest_mlp() -> None:
    sizes = [len(models.model_bytes(n)) for n in ("tiny", "mlp", "wide")]
    assert sizes == sorted(sizes)
    assert models.input_specs("wide")[0].shape == (64, 256)


def test_builtin_input_specs_match_what_onnx_and_ort_read_from_the_files() -> None:
    for name in BUILTIN:
        path = models.model_path(name)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        from_ort = [
            models.input_spec_from_ort(i.name, i.shape, i.type) for i in session.get_inputs()
        ]
        assert models.input_specs(name) == models.input_specs(path) == from_ort


def test_input_specs_fix_symbolic_dims_to_one_and_skip_initializers(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 3])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 2])
    w = helper.make_tensor_value_info("W", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "user",
        [x, ids, w],
        [y],
        [helper.make_tensor("W", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])],
    )
    path = tmp_path / "user.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert models.input_specs(path) == [
        InputSpec("X", (1, 3), np.dtype(np.float32)),
        InputSpec("ids", (1, 2), np.dtype(np.int64)),
    ]


def test_input_spec_from_ort_maps_type_names_and_symbolic_dims() -> None:
    spec = models.input_spec_from_ort("ids", ["batch", None, 5], "tensor(int32)")
    assert spec == InputSpec("ids", (1, 1, 5), np.dtype(np.int32))
    with pytest.raises(RacefuzzError, match=r"^input 's' has type tensor\(string\), which"):
        models.input_spec_from_ort("s", [1], "tensor(string)")


def test_random_inputs_are_deterministic_per_seed() -> None:
    specs = [
        InputSpec("x", (3, 4), np.dtype(np.float32)),
        InputSpec("i", (5,), np.dtype(np.int64)),
        InputSpec("b", (2,), np.dtype(np.bool_)),
    ]
    a, b, c = (models.random_inputs(specs, s) for s in (1, 1, 2))
    for name in ("x", "i", "b"):
        np.testing.assert_array_equal(a[name], b[name])
        assert a[name].dtype == specs[[s.name for s in specs].index(name)].dtype
    assert not np.array_equal(a["x"], c["x"])
    assert a["x"].shape == (3, 4)
    ints = np.concatenate([models.random_inputs(specs, s)["i"] for s in range(20)])
    assert set(ints.tolist()) == {0, 1, 2, 3}


def test_model_path_writes_a_hash_named_file_once_and_reuses_it(cache: Path) -> None:
    first = models.model_path("mlp")
    assert first.parent == cache
    assert first.name.startswith(f"mlp-v{models.MODEL_VERSION}-")
    assert first.read_bytes() == models.model_bytes("mlp")
    stamp = first.stat().st_mtime_ns
    models._memo.clear()
    assert models.model_path("mlp") == first
    assert first.stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir()] == [first.name]


def test_a_cached_model_is_found_without_building_it(monkeypatch: pytest.MonkeyPatch) -> None:
    path = models.model_path("tiny")
    models._memo.clear()

    def refuse() -> bytes:
        raise AssertionError("built again")

    monkeypatch.setitem(models._BUILDERS, "tiny", refuse)
    assert models.model_path("tiny") == path


def test_a_damaged_cache_file_is_rewritten() -> None:
    path = models.model_path("tiny")
    path.write_bytes(b"not a model")
    models._memo.clear()
    assert models.model_path("tiny") == path
    assert path.read_bytes() == models.model_bytes("tiny")


def test_racing_writers_leave_one_complete_file_and_no_temp_files(cache: Path) -> None:
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(models._cached("conv", cache)))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert results[0].read_bytes() == models.model_bytes("conv")
    assert os.listdir(cache) == [results[0].name]


def test_a_user_model_path_is_returned_as_it_was_given(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(models.model_bytes("tiny"))
    assert models.model_path(str(path)) == path
    assert models.model_bytes(str(path)) == models.model_bytes("tiny")


def test_a_missing_user_model_is_an_error() -> None:
    with pytest.raises(RacefuzzError, match=r"^model 'x\.onnx' not found$"):
        models.model_path("x.onnx")


def test_an_unknown_model_name_lists_the_builtins() -> None:
    expected = (
        r"^unknown model 'resnet' \(built-in models: tiny, mlp, wide, conv, eltwise, tail, "
        r"lngelu, einsum, matmulnbits, attention, dynamic, large; "
        r"or give a path to an \.onnx file\)$"
    )
    with pytest.raises(RacefuzzError, match=expected):
        models.model_path("resnet")


def test_size_rank_puts_builtins_in_order_then_user_models_by_size(tmp_path: Path) -> None:
    small, big = tmp_path / "small.onnx", tmp_path / "big.onnx"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x" * 100)
    ranks = [models.size_rank(n) for n in (*BUILTIN, str(small), str(big))]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


def test_a_worker_using_cached_builtins_never_imports_onnx() -> None:
    models.model_path("mlp")
    code = (
        "import sys; from racefuzz.targets import models\n"
        "models.model_path('mlp'); models.random_inputs(models.input_specs('mlp'), 0)\n"
        "assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
