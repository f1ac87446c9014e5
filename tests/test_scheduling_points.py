"""Scheduling points of the EP-ABI layer (`hold`/`resume`, racefuzz/worker/holds.py): a window a
Python thread cannot aim at becomes a step order. On the real testbed, with B21 (another session
created between a run's OnRunStart and its Compute) as the window."""

from __future__ import annotations

import random
from pathlib import Path

from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.strategies.random_walk import walk
from racefuzz.strategies.space import space_for
from racefuzz.targets.registry import load_target


def schedule(*steps: Step, threads: int = 2) -> Schedule:
    return Schedule(threads, (Step(0, Op.REGISTER), *steps), name="held")


CREATE_S1 = Step(0, Op.CREATE, session="s1", profile="dml", model="mlp")
CREATE_S2 = Step(0, Op.CREATE, session="s2", profile="dml", model="mlp")
HOLD_S1 = Step(1, Op.HOLD, session="s1", mode="compute")
RUN_S1 = Step(1, Op.RUN, session="s1")
RESUME_S1 = Step(0, Op.RESUME, session="s1")
HELD = schedule(CREATE_S1, HOLD_S1, RUN_S1, CREATE_S2, RESUME_S1)


def zeroed(result: RunResult) -> bool:
    return any(f.kind == "zeroed" for f in result.findings)


def test_a_held_compute_makes_the_b21_window_every_time(testbed_library: Path) -> None:
    held = Runner(load_target("testbed[layer]:B21"), zygote=False)
    assert all(zeroed(held.run(HELD)) for _ in range(5))
    # The same schedule without the layer: the hold is a skipped step, the run ends before the
    # second create, and B21's window never opens.
    plain = Runner(load_target("testbed:B21"), zygote=False)
    result = plain.run(HELD)
    assert result.outcomes[2].skipped and not zeroed(result)
    # And with the layer but the bug off, the held schedule is clean: holding changes no output.
    fixed = Runner(load_target("testbed[layer]"), zygote=False).run(HELD)
    assert not fixed.findings and all(o.ok for o in fixed.outcomes)


def test_a_parked_thread_whose_next_step_is_up_is_released(testbed_library: Path) -> None:
    # Thread 1 parks in its run; its next step is another run on thread 1: without release the
    # schedule would wait on itself until the layer's own limit (3 s).
    runner = Runner(load_target("testbed[layer]"), zygote=False)
    result = runner.run(schedule(CREATE_S1, HOLD_S1, RUN_S1, Step(1, Op.RUN, session="s1")))
    assert all(o.ok for o in result.outcomes), result.outcomes
    assert max(o.ms for o in result.outcomes) < 2500


def test_a_point_never_reached_and_a_resume_of_nothing_are_harmless(
    testbed_library: Path,
) -> None:
    runner = Runner(load_target("testbed[layer]"), zygote=False)
    never = Step(1, Op.HOLD, session="s1", mode="copy")  # a plain run makes no session copy
    result = runner.run(schedule(CREATE_S1, never, RUN_S1, RESUME_S1, RESUME_S1))
    assert all(o.ok for o in result.outcomes) and not result.findings


def test_only_a_layered_target_generates_held_windows(testbed_library: Path) -> None:
    rng = random.Random(3)
    plain = space_for(load_target("testbed"), max_steps=24, max_threads=4)
    assert not {Op.HOLD, Op.RESUME} & plain.ops
    layered = space_for(load_target("testbed[layer]"), max_steps=24, max_threads=4)
    schedules = [walk(layered, rng) for _ in range(200)]
    windows = 0
    for s in schedules:
        assert not layered.problems(s)
        for i, step in enumerate(s.steps):
            if step.op is not Op.HOLD:
                continue
            after = s.steps[i + 1 :]
            runs = [x for x in after if x.session == step.session and x.op is not Op.RESUME]
            others = [x for x in after if runs and x.thread != runs[0].thread]
            windows += bool(runs and others)
    assert windows >= 10
