"""Kept values that sessions use in place (`keep`, `bind`, `bind [again]`, `upload`) on real EPs,
and B22 (an upload into a block an earlier upload filled is queued on the copy engine): the fixed
designs compute on whatever was last written into a kept value, B22 computes on the old bytes,
and only a run reading the value in place sees it (a `read` is right)."""

from __future__ import annotations

from pathlib import Path

import pytest

from racefuzz.execute import executor
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.contract import breaches
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target


def schedule(profile: str, *rest: Step) -> Schedule:
    head = (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile=profile, model="tiny"),
        Step(0, Op.ALLOC, value="v1", profile=profile),
    )
    return Schedule(1, (*head, *rest), "kept")


def bind(mode: str | None = None) -> Step:
    return Step(0, Op.BIND, session="s1", peer="v1", mode=mode)


def outcomes(result: RunResult) -> dict[int, tuple[bool, str]]:
    return {o.step: (o.ok, o.check or "") for o in result.outcomes}


EVERY_KEPT_OP = (
    bind(),
    Step(0, Op.UPLOAD, value="v1"),
    bind("again"),  # the kept binding reads what the upload wrote
    Step(0, Op.READ, value="v1"),
    Step(0, Op.KEEP, value="v2", peer="s1"),
    Step(0, Op.RELEASE, session="s1"),  # v2, an output of s1, outlives it
    Step(0, Op.READ, value="v2"),
    Step(0, Op.UPLOAD, value="v2", mode="stream"),
    Step(0, Op.FREE, value="v2"),
)


@pytest.mark.parametrize(("target", "profile"), [("testbed", "mgx"), ("nxrt-cpu", "nxrt")])
def test_every_kept_value_op_is_right_on_a_correct_ep(
    target: str, profile: str, testbed_library: Path
) -> None:
    result = executor.run(load_target(target), schedule(profile, *EVERY_KEPT_OP))
    assert not [f for f in result.findings if f.kind != "misroute"], result.findings
    out = outcomes(result)
    assert all(ok for ok, _ in out.values()), out
    assert out[3] == (True, "ok") and out[5] == (True, "ok"), out  # both binds were checked


def test_b22_is_seen_by_a_run_reading_the_value_in_place_only(testbed_library: Path) -> None:
    update = Step(0, Op.UPLOAD, value="v1")
    b22 = load_target("testbed:B22")
    result = executor.run(b22, schedule("mgx", update, bind()))
    assert [(f.kind, f.op) for f in result.findings] == [("mismatch", "bind")], result.findings
    # The same upload read back through copy_tensors is right (the barrier drains the engine).
    read = executor.run(b22, schedule("mgx", update, Step(0, Op.READ, value="v1")))
    assert not read.findings, read.findings
    # The first upload into a block (alloc's) is not an update; dml copies at once.
    assert not executor.run(b22, schedule("mgx", bind())).findings
    assert not executor.run(b22, schedule("dml", update, bind())).findings
    assert not executor.run(load_target("testbed"), schedule("mgx", update, bind())).findings


def test_reading_a_value_whose_stream_upload_nothing_ordered_is_the_callers_breach() -> None:
    on_stream = Step(0, Op.UPLOAD, value="v1", mode="stream")
    unordered = schedule("mgx", bind(), on_stream, bind("again"))
    assert [(b.step, b.rule) for b in breaches(unordered)] == [
        (5, "bind reads v1 while its upload on a sync stream is not ordered before it")
    ]
    # Python has no call that waits for a stream, and a plain copy does not on every EP: a read
    # or another upload is a breach too; only dropping the value is left.
    read = schedule("mgx", on_stream, Step(0, Op.READ, value="v1"), bind())
    assert [(b.step, b.rule) for b in breaches(read)] == [
        (4, "read reads v1 while its upload on a sync stream is not ordered before it"),
        (5, "bind reads v1 while its upload on a sync stream is not ordered before it"),
    ]
    assert breaches(schedule("mgx", on_stream, Step(0, Op.FREE, value="v1"))) == []
    unordered_copy = Schedule(1, (*schedule("mgx").steps[:2], _copy("stream_unordered")), "c")
    assert [b.rule.split()[0] for b in breaches(unordered_copy)] == ["copy"]
    assert breaches(Schedule(1, (*schedule("mgx").steps[:2], _copy("stream")), "c")) == []


def _copy(mode: str) -> Step:
    return Step(0, Op.COPY, profile="mgx", mode=mode)


def test_an_upload_beside_another_call_on_its_value_is_the_applications_own_race() -> None:
    upload = Step(1, Op.UPLOAD, value="v1", group=1)
    racing = Schedule(
        2, (*schedule("mgx").steps, Step(0, Op.BIND, session="s1", peer="v1", group=1), upload), "x"
    )
    assert [b.step for b in breaches(racing)] == [4]
    apart = Schedule(
        2, (*schedule("mgx").steps, Step(0, Op.RUN, session="s1", group=1), upload), "x"
    )
    assert breaches(apart) == []
