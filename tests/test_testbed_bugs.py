"""Each bug switch of the testbed shows its seed symptom, and only in the orders the seed names.

Switches are read when the library loads, so every case runs in its own process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testbed_scenarios import Result, run_scenario

from racefuzz.targets import models

HIP = "HIP failure 1: invalid argument"
DML = "DML failure: 0x80070057 invalid allocation handle"
NOT_FOUND = "Data transfer implementation between source and destination device was not found."
BUGS = ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8")


@pytest.fixture(scope="module")
def mlp() -> Path:
    return models.model_path("mlp")  # X [4,32] -> Y [4,16], the ops the testbed computes


def _fails_with(result: Result, message: str) -> bool:
    return result.outcome == "error" and message in result.message


# --- each switch, its smallest repro -----------------------------------------------------------


def test_b1_latch_once_breaks_dml_after_mgx(testbed_library: Path, mlp: Path) -> None:
    # create mgx; run mgx; release mgx; create dml; run dml (AIRADSW-750)
    result = run_scenario(testbed_library, mlp, "S1", bugs=["B1"])
    assert _fails_with(result, HIP), result


def test_b2_eager_snapshot_breaks_every_env_copy(testbed_library: Path, mlp: Path) -> None:
    # create dml; copy_tensors (the 10D / OGA failure), even though a session exists
    result = run_scenario(testbed_library, mlp, "S2", bugs=["B2"])
    assert (result.outcome, result.message) == ("error", NOT_FOUND)


def test_b3_lazy_reresolve_routes_dml_inputs_to_hip(testbed_library: Path, mlp: Path) -> None:
    # create dml; create mgx; run dml
    result = run_scenario(testbed_library, mlp, "create_dml_create_mgx_run_dml", bugs=["B3"])
    assert _fails_with(result, HIP), result


def test_b4_shared_allocator_hands_dml_an_mgx_block(testbed_library: Path, mlp: Path) -> None:
    # create dml; create mgx; run dml: its buffers are mgx blocks, its DML transfer rejects them
    result = run_scenario(testbed_library, mlp, "create_dml_create_mgx_run_dml", bugs=["B4"])
    assert _fails_with(result, DML), result


@pytest.mark.parametrize("profile", ["dml", "mgx"])
def test_b5_thread_local_slot_zeroes_outputs_on_a_worker(
    testbed_library: Path, mlp: Path, profile: str
) -> None:
    # create <profile> on main; run it on another thread
    result = run_scenario(testbed_library, mlp, "run_on_worker", profile, bugs=["B5"])
    assert result.outcome == "zeroed", result


def test_b6_null_hook_as_success_breaks_mgx_alone(testbed_library: Path, mlp: Path) -> None:
    # create mgx; run mgx
    result = run_scenario(testbed_library, mlp, "alone", "mgx", bugs=["B6"])
    assert result.outcome in ("error", "crash"), result


def test_b7_no_compute_sync_returns_early_on_a_worker(testbed_library: Path, mlp: Path) -> None:
    # create mgx on main; run it on another thread
    result = run_scenario(testbed_library, mlp, "run_on_worker", "mgx", bugs=["B7"])
    assert result.outcome in ("zeroed", "mismatch"), result


def test_b8_torn_slot_write_misroutes_concurrent_construction(
    testbed_library: Path, mlp: Path
) -> None:
    # create dml || create mgx (two threads, released together); run each; up to 20 tries
    result = run_scenario(testbed_library, mlp, "concurrent_construction_tries", "20", bugs=["B8"])
    assert result.outcome in ("error", "zeroed", "mismatch"), result


# --- faithfulness: what each switch must leave alone ----------------------------------------


@pytest.mark.parametrize("profile", ["dml", "mgx"])
@pytest.mark.parametrize("bug", BUGS)
def test_one_session_alone_on_the_main_thread_stays_correct(
    testbed_library: Path, mlp: Path, bug: str, profile: str
) -> None:
    # Plain runs, IOBinding with device values and env-level copies, on the creating thread.
    result = run_scenario(testbed_library, mlp, "alone_bound", profile, bugs=[bug])
    if bug == "B6" and profile == "mgx":
        assert result.outcome in ("error", "crash"), result
    elif bug == "B2":
        # Sessions work; only the env-level copies fail, as in the 10D build.
        assert (result.outcome, result.message) == ("error", NOT_FOUND)
        alone = run_scenario(testbed_library, mlp, "alone", profile, bugs=[bug])
        assert (alone.outcome, alone.message) == ("ok", ""), alone
    else:
        assert (result.outcome, result.message) == ("ok", ""), result


# Seed scenarios a switch must not break, because the seed says they are not its orders:
# sequential single-backend processes, per-session threads that never leave their creator, ...
UNBROKEN = [
    ("B1", "S2"),  # one backend only
    ("B2", "S3"),  # sessions themselves work
    ("B3", "S1"),  # sequential, released before the next backend
    ("B3", "S9"),
    ("B4", "S1"),
    ("B4", "S9"),
    ("B5", "S3"),  # every session runs on its creating thread
    ("B5", "S4"),
    ("B5", "S7"),
    ("B6", "S2"),  # DirectML has its hook
    ("B7", "S4"),
    ("B7", "S6"),
    ("B8", "S3"),  # sequential construction
    ("B8", "S6"),
]


@pytest.mark.parametrize(("bug", "scenario"), UNBROKEN)
def test_a_switch_leaves_the_orders_it_does_not_model_alone(
    testbed_library: Path, mlp: Path, bug: str, scenario: str
) -> None:
    result = run_scenario(testbed_library, mlp, scenario, bugs=[bug])
    assert (result.outcome, result.message) == ("ok", ""), result


# --- white box: the trace names who owns and who served ---------------------------------------


def _misroutes(trace: Path) -> list[dict[str, object]]:
    return [e for e in map(json.loads, trace.read_text().splitlines()) if e["misroute"]]


def test_b3_trace_names_the_owning_and_the_serving_backend(
    testbed_library: Path, mlp: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    run_scenario(testbed_library, mlp, "create_dml_create_mgx_run_dml", bugs=["B3"], trace=trace)
    [event] = _misroutes(trace)
    assert event["ev"] == "copy"
    assert event["backend"] == "mgx"
    assert event["session"] == 1  # the dml session, created first
    assert event["src"] == {"owner": "host"}
    assert event["dst"] == {"owner": "dml", "kind": "device"}
    assert isinstance(event["thread"], int)


def test_r1_trace_names_the_owning_and_the_serving_backend(
    testbed_library: Path, mlp: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    run_scenario(testbed_library, mlp, "S8", trace=trace)
    [event] = _misroutes(trace)
    assert event["ev"] == "copy"
    assert (event["backend"], event["session"]) == ("mgx", None)  # env-level: no session
    assert event["src"] == {"owner": "dml", "kind": "device"}
    assert event["dst"] == {"owner": "host"}


def test_b4_trace_shows_the_allocation_served_by_the_other_backend(
    testbed_library: Path, mlp: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    run_scenario(testbed_library, mlp, "create_dml_create_mgx_run_dml", bugs=["B4"], trace=trace)
    allocs = [e for e in _misroutes(trace) if e["ev"] == "alloc"]
    assert allocs
    assert allocs[0]["backend"] == "mgx"
    assert allocs[0]["session_backend"] == "dml"


# --- B18..B20: one defect each, reached through several orders and ops ------------------------

CONTEXT_GONE = "RacefuzzTestbed: the device context was destroyed by a session release"
ONE_DEFECT = ("B18", "B19", "B20")


@pytest.mark.parametrize("scenario", ["release_then_create dml", "release_then_create mgx", "S9"])
def test_b18_a_create_after_the_last_release_segfaults(
    testbed_library: Path, mlp: Path, scenario: str
) -> None:
    result = run_scenario(testbed_library, mlp, *scenario.split(), bugs=["B18"])
    assert (result.outcome, result.returncode) == ("crash", -11), result


@pytest.mark.parametrize("scenario", ["S3", "second_backend_copies", "S9"])
def test_b19_the_second_backend_to_touch_device_memory_segfaults(
    testbed_library: Path, mlp: Path, scenario: str
) -> None:
    # Through a launch (S3: dml runs, then mgx) or an env-level copy (second_backend_copies).
    result = run_scenario(testbed_library, mlp, scenario, bugs=["B19"])
    assert (result.outcome, result.returncode) == ("crash", -11), result


@pytest.mark.parametrize("profile", ["dml", "mgx"])
@pytest.mark.parametrize("scenario", ["one_released_other_runs", "value_outlives_its_session"])
def test_b20_a_release_fails_every_later_copy_and_launch_with_one_message(
    testbed_library: Path, mlp: Path, scenario: str, profile: str
) -> None:
    result = run_scenario(testbed_library, mlp, scenario, profile, bugs=["B20"])
    assert result.outcome == "error" and CONTEXT_GONE in result.message, result


@pytest.mark.parametrize("profile", ["dml", "mgx"])
@pytest.mark.parametrize("bug", ONE_DEFECT)
def test_b18_to_b20_leave_one_session_alone_correct(
    testbed_library: Path, mlp: Path, bug: str, profile: str
) -> None:
    result = run_scenario(testbed_library, mlp, "correctness", profile, bugs=[bug])
    assert (result.outcome, result.message) == ("ok", ""), result


@pytest.mark.parametrize(
    ("bug", "scenario"),
    [
        ("B18", "S3"),  # no session is ever released
        ("B18", "one_released_other_runs dml"),  # a release that is not the last
        ("B19", "S2"),  # one backend only
        ("B20", "S1"),  # a release, then a new session of the other backend
        ("B20", "S9"),  # each release followed by a CreateEp before any copy
    ],
)
def test_b18_to_b20_leave_the_orders_they_do_not_model_alone(
    testbed_library: Path, mlp: Path, bug: str, scenario: str
) -> None:
    result = run_scenario(testbed_library, mlp, *scenario.split(), bugs=[bug])
    assert (result.outcome, result.message) == ("ok", ""), result
