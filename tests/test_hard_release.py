"""`hard_release` (ReleaseSession through the C API, as a C or C++ application releases a session)
on real ORT and real EPs, B23 (ReleaseEp frees the blocks its allocator handed out while tensors
still hold them: the next use faults, and under ASan reads freed memory), and the contract rule
that makes a hard release of a session in use misuse.

A Python session is kept alive by its kept values (their IOBinding holds it): a plain `release`
never reaches ReleaseEp while one lives, so B23 is reachable through `hard_release` only."""

from __future__ import annotations

from pathlib import Path

import pytest

from racefuzz.execute import executor
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.contract import breaches
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target


def outlived(profile: str, release: Op = Op.HARD_RELEASE) -> Schedule:
    """s1's device output kept as v1, s1 released, v1 read back."""
    return Schedule(
        1,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile=profile, model="tiny"),
            Step(0, Op.KEEP, value="v1", peer="s1"),
            Step(0, release, session="s1"),
            Step(0, Op.READ, value="v1"),
            Step(0, Op.CREATE, session="s2", profile=profile, model="tiny"),
            Step(0, Op.RUN, session="s2"),
        ),
        "outlived",
    )


def outcomes(result: RunResult) -> dict[int, tuple[bool, str]]:
    return {o.step: (o.ok, o.check or o.message) for o in result.outcomes}


@pytest.mark.parametrize(
    ("target", "profile"), [("testbed", "mgx"), ("testbed", "dml"), ("nxrt-cpu", "nxrt")]
)
def test_values_outlive_a_hard_released_session_on_a_correct_ep(
    target: str, profile: str, testbed_library: Path
) -> None:
    result = executor.run(load_target(target), outlived(profile))
    assert not result.findings, result.findings
    out = outcomes(result)
    assert out[3] == (True, "") and out[4] == (True, "ok"), out  # released, then read right


def test_a_hard_release_reaches_release_ep_at_once(testbed_library: Path) -> None:
    # B20 destroys the backend's context in every ReleaseEp: a read of v1 right after fails
    # only if the hard release really released the EP (a plain release waits for v1).
    hard = outcomes(executor.run(load_target("testbed:B20"), outlived("mgx")))
    plain = outcomes(executor.run(load_target("testbed:B20"), outlived("mgx", Op.RELEASE)))
    assert not hard[4][0] and "context was destroyed" in hard[4][1], hard
    assert plain[4] == (True, "ok"), plain


def test_b23_frees_what_a_value_still_holds_and_only_a_hard_release_gets_there(
    testbed_library: Path,
) -> None:
    target = load_target("testbed:B23")
    for profile, fault in (("mgx", "illegal memory access"), ("dml", "has been suspended")):
        hard = executor.run(target, outlived(profile))
        assert [(f.kind, f.op, f.step) for f in hard.findings] == [("error", "read", 4)]
        assert fault in hard.findings[0].message, hard.findings
        plain = executor.run(target, outlived(profile, Op.RELEASE))
        assert not plain.findings, plain.findings


@pytest.mark.slow  # builds and runs the AddressSanitizer testbed
def test_b23_is_a_heap_use_after_free_under_asan(testbed_library: Path) -> None:
    result = executor.run(load_target("testbed[asan]:B23"), outlived("mgx"))
    (finding,) = result.findings
    assert finding.kind == "asan" and "heap-use-after-free" in finding.message, finding
    assert "Drop" in finding.message and finding.step == 4, finding


def held(*rest: Step) -> Schedule:
    head = (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="mgx", model="tiny"),
        Step(0, Op.HOLD, session="s1", mode="compute"),
    )
    return Schedule(2, (*head, *rest), "held")


def test_a_hard_release_of_a_session_parked_in_a_call_is_misuse() -> None:
    parked = held(Step(1, Op.RUN, session="s1"), Step(0, Op.HARD_RELEASE, session="s1"))
    (breach,) = breaches(parked)
    assert breach.step == 4 and "parked inside ORT" in breach.rule
    # A call through its peer parks the session too: `keep` runs s1.
    kept = held(Step(1, Op.KEEP, value="v1", peer="s1"), Step(0, Op.HARD_RELEASE, session="s1"))
    assert [b.step for b in breaches(kept)] == [4]
    # Nothing parked yet, or resumed first: the session is not in use.
    assert not breaches(held(Step(0, Op.HARD_RELEASE, session="s1")))
    resumed = held(
        Step(1, Op.RUN, session="s1"),
        Step(0, Op.RESUME, session="s1"),
        Step(0, Op.HARD_RELEASE, session="s1"),
    )
    assert not breaches(resumed)
    # A plain release waits for Python's references: never misuse.
    assert not breaches(held(Step(1, Op.RUN, session="s1"), Step(0, Op.RELEASE, session="s1")))


def test_a_hard_release_beside_a_call_of_its_session_is_misuse() -> None:
    def grouped(release: Op, other: str) -> Schedule:
        steps = (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="mgx", model="tiny"),
            Step(0, Op.CREATE, session="s2", profile="mgx", model="tiny"),
            Step(1, Op.RUN_ASYNC, session=other, group=1),
            Step(0, release, session="s1", group=1),
        )
        return Schedule(2, steps, "grouped")

    (breach,) = breaches(grouped(Op.HARD_RELEASE, "s1"))
    assert breach.step == 4 and "beside 'run_async' of it (step 3)" in breach.rule
    assert not breaches(grouped(Op.HARD_RELEASE, "s2"))  # another session's run: legal
    assert not breaches(grouped(Op.RELEASE, "s1"))


def test_a_crash_in_the_group_of_a_hard_release_of_its_session_is_misuse(
    testbed_library: Path,
) -> None:
    # onnxruntime#28160's order: the run that crashes is step 2, the breach step 3 of the same
    # group (its steps run in any order), so the crash is the application's.
    path = (
        Path(__file__).parents[1]
        / "schedules/misuse/28160_session_released_during_its_own_run.json"
    )
    target, schedule = load_target("testbed"), load(path)
    found = [f for _ in range(5) for f in executor.run(target, schedule).findings]
    assert found, "the run crashed under the release in 10 replays of 10 when written"
    assert all(f.misuse.startswith("step 3: hard_release of s1 beside") for f in found), found
