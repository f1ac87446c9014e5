"""Stream copies and IOBinding variants on the real testbed (issue 11, part A).

The fixed design's asynchronous mgx streams must keep every new mode right: uploads on a stream
from `create_sync_stream()` read back on that stream or without one, host inputs bound with
`bind_cpu_input`, host outputs, and `synchronize_inputs`/`_outputs`, on the creating thread and
on another. B11 (an env-level upload sent off its stream) and B12 (a bind-time upload that drops
its stream) are each seen only through their mode: the same schedule without it is clean.
"""

from __future__ import annotations

from racefuzz.execute import executor
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.alone import alone_schedule
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target

BOUND_MODES = ("host_in", "host_in_sync", "host_out", "sync")


def _steps(copy_mode: str | None, bound_mode: str | None) -> tuple[Step, ...]:
    return (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="mgx", model="mlp"),
        Step(0, Op.COPY, profile="mgx", mode=copy_mode),
        Step(0, Op.RUN_BOUND, session="s1", mode=bound_mode),
    )


def _checks(result: RunResult) -> list[str | None]:
    return [o.check for o in result.outcomes if o.check is not None]


def test_the_fixed_design_keeps_every_stream_mode_right() -> None:
    # One backend per schedule: env-level device values follow the last session's backend (R1).
    for profile in ("mgx", "dml"):
        steps = [
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile=profile, model="mlp"),
            *(Step(0, Op.COPY, profile=profile, mode=m) for m in ("stream", "stream_unordered")),
        ]
        # On the creating thread (inline launches) and on another (launches queued on a stream).
        for thread in (0, 1):
            steps += [Step(thread, Op.RUN_BOUND, session="s1", mode=m) for m in BOUND_MODES]
        result = executor.run(load_target("testbed"), Schedule(2, tuple(steps), "streams"))
        assert not result.findings, result.findings
        assert _checks(result) == ["ok"] * (2 + 2 * len(BOUND_MODES))


def test_b11_is_seen_only_by_an_ordered_stream_copy() -> None:
    target = load_target("testbed:B11")
    found = executor.run(target, Schedule(1, _steps("stream", None), "b11"))
    assert [(f.kind, f.op, f.step) for f in found.findings] == [("corrupt-copy", "copy", 2)]
    assert "(zeros)" in found.findings[0].raw
    for mode in (None, "stream_unordered"):
        assert not executor.run(target, Schedule(1, _steps(mode, None), "plain")).findings


def test_b12_is_seen_only_by_a_host_input_binding() -> None:
    target = load_target("testbed:B12")
    for mode in ("host_in", "host_in_sync"):
        found = executor.run(target, Schedule(1, _steps(None, mode), "b12"))
        assert [(f.kind, f.op, f.step) for f in found.findings] == [("mismatch", "run_bound", 3)]
    for plain in (None, "host_out", "sync"):
        assert not executor.run(target, Schedule(1, _steps(None, plain), "plain")).findings


def test_a_stream_copy_baseline_keeps_its_mode() -> None:
    baseline = alone_schedule(Schedule(1, _steps("stream", "host_in"), "x"), 2)
    assert baseline is not None
    assert baseline.steps == (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="mgx", model="mlp"),
        Step(0, Op.COPY, profile="mgx", mode="stream"),
    )
