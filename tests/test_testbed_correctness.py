"""The testbed EP with no bug switched on: the seed's final design computes what the CPU EP does.

Every scenario runs in a fresh process (tests/testbed_scenarios.py), as racefuzz's workers do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testbed_scenarios import build_gemm, build_mixed, run_scenario

from racefuzz.targets import models


@pytest.fixture(scope="module")
def mlp() -> Path:
    return models.model_path("mlp")  # X [4,32] -> Y [4,16], the ops the testbed computes


@pytest.mark.parametrize("profile", ["dml", "mgx"])
def test_each_profile_matches_the_cpu_ep_on_main_and_worker_threads(
    testbed_library: Path, mlp: Path, profile: str
) -> None:
    # Plain run, IOBinding with device input and device output (bound both ways), env-level
    # copy_tensors round trips; on the main thread and on workers; sessions made on both.
    result = run_scenario(testbed_library, mlp, "correctness", profile)
    assert (result.outcome, result.message) == ("ok", "")


@pytest.mark.parametrize("profile", ["dml", "mgx"])
def test_unregister_with_live_session_and_device_value_then_reregister(
    testbed_library: Path, mlp: Path, profile: str
) -> None:
    result = run_scenario(testbed_library, mlp, "lifecycle", profile)
    assert (result.outcome, result.message) == ("ok", "")


@pytest.mark.parametrize("scenario", ["S1", "S2", "S3", "S4", "S5", "S6", "S7", "S9"])
def test_the_seed_scenarios_pass_with_the_fixed_design(
    testbed_library: Path, mlp: Path, scenario: str
) -> None:
    result = run_scenario(testbed_library, mlp, scenario)
    assert (result.outcome, result.message) == ("ok", "")


def test_residual_r1_an_env_copy_after_another_backend_is_misrouted(
    testbed_library: Path, mlp: Path
) -> None:
    # S8: the fixed design still fails here, as the seed's known limitation says.
    result = run_scenario(testbed_library, mlp, "S8")
    assert (result.outcome, result.message) == ("error", "HIP failure 1: invalid argument")


def test_concurrent_construction_never_misroutes_with_the_fixed_design(
    testbed_library: Path, mlp: Path
) -> None:
    result = run_scenario(testbed_library, mlp, "concurrent_construction_tries", "30")
    assert (result.outcome, result.message) == ("ok", "")


def test_the_fixed_design_traces_no_misroute_outside_env_copies(
    testbed_library: Path, mlp: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    result = run_scenario(testbed_library, mlp, "S3", trace=trace)
    assert result.outcome == "ok"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert {e["ev"] for e in events} == {"alloc", "copy", "compute"}
    assert not [e for e in events if e["misroute"]]
    computes = [(e["session"], e["backend"]) for e in events if e["ev"] == "compute"]
    assert computes == [(1, "dml"), (2, "mgx")]


def test_env_copy_before_any_session_is_a_clear_error(testbed_library: Path, mlp: Path) -> None:
    result = run_scenario(testbed_library, mlp, "env_copy_before_session")
    assert (result.outcome, result.message) == (
        "error",
        "RacefuzzTestbed: no backend has been selected yet; "
        "create a session before copying device tensors.",
    )
    assert "create a session before allocating device memory." in result.stderr


def test_a_missing_profile_is_a_clear_error(testbed_library: Path, mlp: Path) -> None:
    result = run_scenario(testbed_library, mlp, "create_only")
    assert result.outcome == "error"
    assert result.message.rstrip().endswith(
        "RacefuzzTestbed needs the provider option 'profile' ('dml' or 'mgx')."
    )


def test_an_unknown_profile_is_named_in_the_error(testbed_library: Path, mlp: Path) -> None:
    result = run_scenario(testbed_library, mlp, "create_only", "cuda")
    assert result.outcome == "error"
    assert result.message.rstrip().endswith(
        "RacefuzzTestbed: unknown profile 'cuda'; expected 'dml' or 'mgx'."
    )


def test_a_model_with_another_op_runs_on_the_cpu_ep(testbed_library: Path, tmp_path: Path) -> None:
    model = tmp_path / "mixed.onnx"
    build_mixed(model)
    trace = tmp_path / "trace.jsonl"
    result = run_scenario(testbed_library, model, "alone", "dml", trace=trace)
    assert (result.outcome, result.message) == ("ok", "")
    assert not trace.exists() or trace.read_text() == ""  # the EP claimed nothing


@pytest.mark.parametrize("profile", ["dml", "mgx"])
def test_an_explicit_gemm_with_its_attributes_matches_the_cpu_ep(
    testbed_library: Path, tmp_path: Path, profile: str
) -> None:
    model = tmp_path / "gemm.onnx"
    build_gemm(model)
    trace = tmp_path / "trace.jsonl"
    result = run_scenario(testbed_library, model, "alone", profile, trace=trace)
    assert (result.outcome, result.message) == ("ok", "")
    assert '"ev":"compute"' in trace.read_text()  # computed by the EP, not the CPU EP
