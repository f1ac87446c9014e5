"""A shrink lends its job slot to fuzzing between its candidates.

While fuzzing has time left, a shrink keeps `SHRINK_SHARE` of its slot's time; before each
batch of its runs (`shrink.runs.Runs`), it fuzzes in the slot until fuzzing has had the rest.
Without it a campaign at one job found nothing while a cluster shrank, and at two jobs the rate
of new schedules halved. The time lent is not the shrink's: its deadline moves by as much.

Runs in the shrink's thread; the strategy and the campaign's records live in trio's thread, so
a schedule is drawn and its result recorded there (`trio.from_thread`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule

SHRINK_SHARE = 0.4


class Lending:
    """One shrink's account of its slot: how long it has held it, how much it lent."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.lent = 0.0

    def owed(self) -> bool:
        """Whether fuzzing is owed time: the shrink has had more than its share."""
        shrinking = time.monotonic() - self.started - self.lent
        return self.lent < shrinking * (1 - SHRINK_SHARE) / SHRINK_SHARE


def lend_slot(
    account: Lending,
    fuzzing: Callable[[], bool],
    next_fuzz: Callable[[], tuple[Schedule | None, str]],
    execute: Callable[[Schedule], RunResult],
    record: Callable[[RunResult, str], None],
) -> float:
    """Fuzz in this slot while `account` says fuzzing is owed time; the seconds it took.
    `next_fuzz` and `record` run in trio's thread; `execute` here (its `LauncherClosed` at the
    campaign's end ends the shrink too)."""
    t0 = time.monotonic()
    while fuzzing() and account.owed():
        try:
            schedule, source = trio.from_thread.run_sync(next_fuzz)
        except (trio.RunFinishedError, trio.Cancelled):
            break
        if schedule is None:
            break
        t1 = time.monotonic()
        result = execute(schedule)
        account.lent += time.monotonic() - t1
        try:
            trio.from_thread.run_sync(record, result, source)
        except (trio.RunFinishedError, trio.Cancelled):
            break
    return time.monotonic() - t0
