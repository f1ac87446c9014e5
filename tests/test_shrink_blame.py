"""Under overlap clustering, a failure that outlives its overlap group is blamed on an earlier
group: a device lost in `[create || create]` fails every later copy, whatever overlaps it.
Uses the schedule helpers of `test_shrink`."""

from __future__ import annotations

from pathlib import Path

from test_shrink import copy, create, g, library_of, minimal, reg, run

from racefuzz.judge.oracles import overlap_shape
from racefuzz.judge.outcome import Exit, Finding, RunResult, StepOutcome
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule
from racefuzz.shrink.best import resumed_signature
from racefuzz.shrink.passes import normalised
from racefuzz.shrink.shrinker import shrink


def _copy_fails(schedule: Schedule, broken_from: int | None, message: str) -> RunResult:
    """The first copy at or after `broken_from` fails, with the shape the oracle gives it."""
    found: tuple[Finding, ...] = ()
    if broken_from is not None:
        for i in range(broken_from, len(schedule.steps)):
            if schedule.steps[i].op == Op.COPY:
                shape = overlap_shape(schedule, i)
                found = (Finding("error", "copy", message, ("dml",), step=i, overlap=shape),)
                break
    return RunResult(schedule=schedule, outcomes=(), exit=Exit.CLEAN, findings=found)


def device_lost(schedule: Schedule) -> RunResult:
    """Two creates in one group lose the device: every copy after that group fails."""
    after = next(
        (
            stop
            for start, stop in schedule.groups()
            if sum(s.op == Op.CREATE for s in schedule.steps[start:stop]) > 1
        ),
        None,
    )
    return _copy_fails(schedule, after, "Device is lost")


def copy_run_race(schedule: Schedule) -> RunResult:
    """A real race of its own: a copy overlapping a run reads zeros."""
    for start, stop in schedule.groups():
        if {Op.COPY, Op.RUN} <= {s.op for s in schedule.steps[start:stop]}:
            return _copy_fails(schedule, start, "zeros")
    return _copy_fails(schedule, None, "")


# reg; [create s1 || create s2]; [copy || run s1]: the copy fails in the copy+run group.
AFTER_CREATES = minimal(
    reg(),
    g(create(0, "s1", "dml"), 1),
    g(create(1, "s2", "mgx"), 1),
    g(copy(0, "dml"), 2),
    g(run(1, "s1"), 2),
    threads=2,
)


def test_a_failure_that_outlives_its_group_is_shrunk_as_the_earlier_groups_race() -> None:
    (first,) = device_lost(AFTER_CREATES).findings
    assert first.cluster == "overlap|copy+run"
    result = shrink(AFTER_CREATES, first.cluster, device_lost, library_of=library_of)
    assert result.signature == "overlap|create"
    assert normalised(result.final) == minimal(
        reg(),
        g(create(0, "s1", "dml"), 1),
        g(create(1, "s2", "mgx"), 1),
        copy(0, "dml"),
        threads=2,
    )
    assert result.last_failure is not None
    assert [f.cluster for f in result.last_failure.findings] == ["overlap|create"]
    assert result.confirmed and dict((p.name, p.shrinks) for p in result.passes)["blame"] == 1


def test_a_race_of_its_own_keeps_its_group_and_its_cluster() -> None:
    (first,) = copy_run_race(AFTER_CREATES).findings
    result = shrink(AFTER_CREATES, first.cluster, copy_run_race, library_of=library_of)
    assert result.signature == "overlap|copy+run"
    (last,) = copy_run_race(result.final).findings
    assert last.cluster == "overlap|copy+run" and result.confirmed
    assert dict((p.name, p.shrinks) for p in result.passes)["blame"] == 0


def test_a_group_of_one_step_overlaps_nothing() -> None:
    lone = minimal(
        reg(),
        g(create(0, "s1", "dml"), 1),
        g(create(1, "s2", "mgx"), 1),
        g(copy(0, "dml"), 2),
        threads=2,
    )
    assert overlap_shape(lone, 3) == "create"
    assert overlap_shape(AFTER_CREATES, 3) == "copy+run"
    assert overlap_shape(AFTER_CREATES, 0) == ""


def test_a_resumed_shrink_asks_for_what_its_best_schedule_was_shrunk_to_show(
    tmp_path: Path,
) -> None:
    best = tmp_path / "cluster.min.json"
    result = shrink(
        AFTER_CREATES, "overlap|copy+run", device_lost, library_of=library_of, best_path=best
    )
    start = load(best)
    assert start == result.final and resumed_signature(best, start) == "overlap|create"
    assert resumed_signature(best, AFTER_CREATES) is None  # not its best: a fresh shrink
    assert resumed_signature(tmp_path / "none.min.json", start) is None
    # Asking the best for the cluster's own shape is what left a webgpu cluster "not
    # reproduced (0/20)" after a resume on the H200.
    assert not shrink(start, "overlap|copy+run", device_lost, library_of=library_of).confirmed
    assert shrink(start, "overlap|create", device_lost, library_of=library_of).confirmed


def abort_after_creates(schedule: Schedule) -> RunResult:
    """Two creates in one group make the EP abort between steps, after the last copy: no step
    in flight, so the crash follows the last overlap group before it, as the oracle places it."""
    raced = any(
        sum(s.op == Op.CREATE for s in schedule.steps[a:b]) > 1 for a, b in schedule.groups()
    )
    copies = [i for i, s in enumerate(schedule.steps) if s.op == Op.COPY]
    if not raced or not copies:
        return RunResult(schedule=schedule, outcomes=(), exit=Exit.CLEAN)
    done = tuple(StepOutcome(i, True) for i in range(copies[-1] + 1))
    shape = overlap_shape(schedule, copies[-1])
    crash = Finding("crash", "none", "SIGABRT", (), None, overlap=shape)
    return RunResult(schedule, done, Exit.CRASH, signal="SIGABRT", findings=(crash,))


def test_a_crash_between_steps_is_blamed_on_the_earlier_group_too() -> None:
    (first,) = abort_after_creates(AFTER_CREATES).findings
    assert first.cluster == "overlap|copy+run"
    result = shrink(AFTER_CREATES, first.cluster, abort_after_creates, library_of=library_of)
    assert result.signature == "overlap|create" and result.confirmed
