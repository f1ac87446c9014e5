"""Each testbed bug switch, replayed on the seed scenario that broke it, yields its finding.

This is racefuzz's regression suite shape (`racefuzz replay schedules/`) checked against known
ground truth: the testbed EP reproduces the seed's bugs behind switches, and the fixed design
keeps only residual R1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from racefuzz.execute import executor
from racefuzz.execute.replay import replay
from racefuzz.execute.runner import Runner
from racefuzz.judge.baseline import ALONE, INTERLEAVING, Baselines
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.json_io import load, load_many
from racefuzz.schedule.model import Schedule
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"
HIP = "HIP failure N: invalid argument"
NOT_FOUND = "Data transfer implementation between source and destination device was not found."


def scenario(name: str) -> Schedule:
    (path,) = SCHEDULES.glob(f"{name}_*.json")
    return load(path)


@pytest.fixture(scope="module")
def targets(testbed_library: Path) -> dict[str, Target]:
    specs = ["testbed"] + [f"testbed:B{i}" for i in range(1, 9)]
    return {spec: load_target(spec) for spec in specs}


def kinds(result: RunResult) -> set[tuple[str, str]]:
    return {(f.kind, f.op) for f in result.findings}


def error_on(result: RunResult, op: str) -> Finding:
    found = [f for f in result.findings if f.kind == "error" and f.op == op]
    assert found, result.findings
    return found[0]


def test_with_no_switch_only_s8_reports_and_it_is_r1(targets: dict[str, Target]) -> None:
    for path, schedule in load_many(SCHEDULES):
        result = executor.run(targets["testbed"], schedule)
        if path.stem.startswith("s8_"):
            f = error_on(result, "read")
            assert f.message == HIP and f.profiles == ("dml",)
            assert ("misroute", "copy") in kinds(result)
        else:
            assert result.findings == (), (path.stem, result.findings)


@pytest.mark.parametrize(
    ("bug", "name", "op", "message"),
    [
        ("B1", "s1", "run", HIP),  # AIRADSW-750: DML after MGX gets the latched HIP transfer
        ("B2", "s2", "copy", NOT_FOUND),  # 10D: the registration-time instance froze null
        ("B3", "s3", "run", HIP),  # Zhaeong: the DML session follows the slot to MGX
    ],
)
def test_each_error_bug_gives_its_seed_message_on_its_scenario_20_of_20(
    targets: dict[str, Target], bug: str, name: str, op: str, message: str
) -> None:
    summary = replay(Runner(targets[f"testbed:{bug}"]), scenario(name), times=20)
    f = next(f for f in summary.findings.values() if f.kind == "error" and f.op == op)
    assert f.message == message
    assert summary.counts[f.signature] == 20


def test_b4_the_second_create_redirects_the_first_sessions_allocations(
    targets: dict[str, Target],
) -> None:
    result = executor.run(targets["testbed:B4"], scenario("s3"))
    f = error_on(result, "run")
    assert f.profiles == ("dml",) and f.step == 3
    assert ("misroute", "alloc") in kinds(result)


@pytest.mark.parametrize("bug", ["B5", "B7"])
def test_runs_on_worker_threads_come_back_zeroed(targets: dict[str, Target], bug: str) -> None:
    result = executor.run(targets[f"testbed:{bug}"], scenario("s5"))
    assert ("zeroed", "run") in kinds(result)
    clean = executor.run(targets[f"testbed:{bug}"], scenario("s6"))  # all on one thread
    assert clean.findings == ()


def test_b6_breaks_the_backend_without_the_hook_even_alone(targets: dict[str, Target]) -> None:
    target = targets["testbed:B6"]
    result = executor.run(target, scenario("s1"))
    f = error_on(result, "run")
    assert f.profiles == ("mgx",)
    classified = Baselines(target, lambda s: executor.run(target, s)).classify(result.schedule, f)
    assert classified.origin == ALONE


def test_b8_concurrent_construction_misroutes_within_twenty_tries(
    targets: dict[str, Target],
) -> None:
    summary = replay(Runner(targets["testbed:B8"]), scenario("s4"), times=20)
    assert summary.failed
    assert any(f.op == "run" for f in summary.findings.values())
    sequential = executor.run(targets["testbed:B8"], scenario("s3"))
    assert sequential.findings == ()


def test_interleaving_findings_are_classified_against_their_baseline(
    targets: dict[str, Target],
) -> None:
    target = targets["testbed:B3"]
    result = executor.run(target, scenario("s3"))
    baselines = Baselines(target, lambda s: executor.run(target, s))
    f = baselines.classify(result.schedule, error_on(result, "run"))
    assert f.origin == INTERLEAVING
