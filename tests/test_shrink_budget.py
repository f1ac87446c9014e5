"""Honest shrinking: the budget covers every run a shrink makes, and a minimal schedule that does
not reproduce is never called shrunk. Uses the pure-Python bug models of `test_shrink`."""

from __future__ import annotations

import time

from test_shrink import CASES, Fake, do_shrink, noisy

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.shrink import result as shrink_result

RUN_S = 0.05


# Between the shrinker's deadline check and the run's first line a loaded machine may not
# schedule the thread for a while: seen 30-80 ms with a CPU hog beside the suite.
SCHEDULING_S = 0.15


def deadline_of(result: shrink_result.ShrinkResult, ended: float) -> float:
    """The shrink's own deadline: its start (`ended` less its seconds) plus its budget."""
    return ended - result.seconds + result.budget_s


class Timed:
    """Wraps a `Fake` run and notes when each run started: "at most one run over the budget"
    means no run starts after the deadline, which holds however loaded the machine is."""

    def __init__(self, fake: Fake) -> None:
        self.fake, self.starts = fake, list[float]()

    def __call__(self, schedule: Schedule) -> RunResult:
        self.starts.append(time.monotonic())
        return self.fake(schedule)


def test_the_budget_covers_the_first_check_and_the_replays_within_one_run() -> None:
    # A schedule that never fails again: the first check alone would take 20 runs (1 s).
    original = noisy(CASES["B3"][0], seed=1)
    timed = Timed(Fake(delay=RUN_S))
    result = do_shrink(original, "B3", timed, budget_s=0.3)
    deadline = deadline_of(result, time.monotonic())
    # No run starts after the deadline, so it ends at most one run late.
    assert timed.starts and max(timed.starts) <= deadline + SCHEDULING_S
    assert result.stopped == "budget" and result.calls == len(timed.starts) < 20
    assert not result.confirmed


def test_the_confirmation_replays_stop_at_the_deadline_too() -> None:
    pattern, _ = CASES["B1"]
    for budget in (0.4, 0.8, 1.5):
        timed = Timed(Fake("B1", delay=RUN_S))
        result = do_shrink(noisy(pattern, seed=9, sessions=8), "B1", timed, budget_s=budget)
        deadline = deadline_of(result, time.monotonic())
        assert max(timed.starts) <= deadline + SCHEDULING_S, (budget, result.reproduction)
        k, n = result.reproduction
        assert k == n  # this model always fails: whatever replays fit, all reproduced


def test_a_minimal_schedule_that_does_not_reproduce_is_not_called_shrunk() -> None:
    # Each schedule fails on its first run only: with no recheck the shrinker keeps cuts that
    # then never fail again, and the confirmation replays say so.
    original = noisy(CASES["B3"][0], seed=1)
    result = do_shrink(original, "B3", Fake("B3", first_run_only=True), need=1, recheck=(0, 0))
    assert len(result.final.steps) < len(original.steps)
    assert result.reproduction == (0, 20)
    assert not result.confirmed
    # Reproducing always is confirmed.
    good = do_shrink(original, "B3", Fake("B3"))
    assert good.reproduction == (20, 20) and good.confirmed


def test_confirmation_needs_a_tenth_of_the_replays_and_the_budget_scales_with_run_cost() -> None:
    assert not shrink_result.confirmed(0, 20) and not shrink_result.confirmed(1, 20)
    assert (
        shrink_result.confirmed(2, 20)
        and shrink_result.confirmed(1, 3)
        and not shrink_result.confirmed(0, 0)
    )
    assert shrink_result.budget_for(0.025) == 60.0  # a fast CPU run gets the floor
    assert shrink_result.budget_for(1.5) == 225.0  # a slow GPU run gets room for ~150 runs
    assert shrink_result.budget_for(60.0) == 1800.0  # capped
