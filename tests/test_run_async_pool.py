"""RunAsync needs intra-op worker threads: ORT refuses it on a pool of one thread ("intra op
thread pool must have at least one thread for RunAsync", onnxruntime#17149). racefuzz skips
`run_async` only where the configured pool really is that small; anywhere else the same refusal
is an error, so a regression of 17149 cannot hide behind the skip."""

from __future__ import annotations

import pytest

from racefuzz.execute.runner import Runner
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.targets.builtin import CPU_EP
from racefuzz.targets.model import Profile, Target


def run_async_on(profile: Profile) -> tuple[bool, str, str]:
    target = Target("cpu-pools", (), (profile,), ("tiny",))
    steps = (
        Step(0, Op.REGISTER),
        make_step(Op.CREATE, 0, session="s1", profile=profile.name, model="tiny"),
        make_step(Op.RUN_ASYNC, 0, session="s1"),
    )
    result = Runner(target, zygote=False).run(Schedule(1, steps))
    outcome = result.outcomes[-1]
    return outcome.ok, str(outcome.skipped or ""), outcome.message


@pytest.mark.parametrize("pools", ["session", "global"])
def test_run_async_runs_on_a_four_thread_pool(pools: str) -> None:
    profile = Profile("p", None, CPU_EP, {}, thread_pools=pools, intra_op_threads=4)
    ok, skipped, message = run_async_on(profile)
    assert ok and not skipped, message


@pytest.mark.parametrize("pools", ["session", "global"])
def test_run_async_on_a_one_thread_pool_runs_or_is_skipped_never_a_finding(pools: str) -> None:
    # onnxruntime 1.31 and 1.32 run it (their pools keep a worker); an older one refused it.
    profile = Profile("p", None, CPU_EP, {}, thread_pools=pools, intra_op_threads=1)
    ok, _, message = run_async_on(profile)
    assert ok, message
