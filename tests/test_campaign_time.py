"""Campaign time goes to finding (issue 28): once the target has hung, later hangs are judged
from the steps that did finish instead of waiting out the step timeout; and a shrink lends its
slot to fuzzing between candidates, so a one-job campaign keeps finding while it shrinks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.lending import SHRINK_SHARE
from racefuzz.campaign.loop import Campaign
from racefuzz.campaign.state import FindingRecord
from racefuzz.execute.executor import Launcher, RunOptions
from racefuzz.execute.hang_limit import HANG_FLOOR_S
from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import Exit, RunResult
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target

HANGS = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
        Step(0, Op.RUN, session="s1"),
        Step(0, Op.CREATE, session="s2", profile="mgx", model="tiny"),
        Step(0, Op.RUN, session="s2"),  # every Compute on mgx blocks forever
    ),
)


@pytest.mark.slow
def test_after_a_first_hang_the_next_is_judged_from_the_steps_that_finished(
    testbed_library: Path,
) -> None:
    target = load_target("testbed").with_env(RACEFUZZ_TESTBED_FAULT="hang:mgx")
    runner = Runner(target, RunOptions(step_timeout=12.0), zygote=False)
    copy = Runner(target, RunOptions(step_timeout=12.0), zygote=False)
    t0 = time.monotonic()
    first = runner.run(HANGS)
    t1 = time.monotonic()
    second = runner.run(HANGS)
    t2 = time.monotonic()
    assert first.exit is Exit.HANG and second.exit is Exit.HANG
    assert t1 - t0 >= 12.0  # nothing seen hang yet: the configured timeout
    assert t2 - t1 < 12.0 - 3 and runner.hang_limit.step_timeout(12.0) >= HANG_FLOOR_S
    assert copy.hang_limit.step_timeout(12.0) == 12.0  # another runner judges on its own


@pytest.mark.slow
def test_a_shrink_lends_its_slot_to_fuzzing_between_candidates(
    testbed_library: Path, tmp_path: Path
) -> None:
    # One job: before lending, nothing was fuzzed while a cluster shrank. The shrink here is a
    # plain loop of real candidate runs for 3 s of its own, lending between them as the shrinker
    # does.
    runner = Runner(load_target("testbed:B3"))
    during: list[int] = []
    lent_s: list[float] = []

    def shrink(
        record: FindingRecord,
        schedule: Schedule,
        failing: RunResult,
        launcher: Launcher | None,
        between: Callable[[], float] | None,
    ) -> None:
        assert between is not None
        before, lent, t0 = campaign.state.schedules, 0.0, time.monotonic()
        while time.monotonic() - t0 - lent < 3:  # 3 s of its own
            lent += between()
            runner.run(schedule, launcher)
        during.append(campaign.state.schedules - before)
        lent_s.append(lent)

    config = CampaignConfig(seconds=20, jobs=1, seed=1)
    campaign = Campaign(runner.target, config, tmp_path, shrink_hook=shrink, runner=runner)
    state = trio.run(campaign.run)
    assert not state.internal_errors, state.internal_errors
    assert during and during[0] >= 5, during
    # The shrink kept about SHRINK_SHARE of the slot: 3 s of its own, 4.5 s lent.
    assert lent_s[0] >= 3 * (1 - SHRINK_SHARE) / SHRINK_SHARE * 0.7, lent_s
