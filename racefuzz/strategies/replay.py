"""Replay: hands out given schedules once each, in order, then None.

Replay is just another strategy (as in Shuttle's `ReplayScheduler`), and it is strict: a schedule
that is not well-formed for the space, or names a profile, model or library the space does not
have, is a `ScheduleError` at construction, never a silent skip, so a replayed failure is the
failure that was recorded. It does not repair, reorder or deduplicate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule, ScheduleError
from racefuzz.strategies.space import Space


class Replay:
    """The given schedules, once each; `seed` is accepted for uniform construction and unused."""

    name = "replay"

    def __init__(self, space: Space, seed: int = 0, *, schedules: Sequence[Schedule]) -> None:
        for i, schedule in enumerate(schedules):
            found = space.problems(schedule)
            if found:
                label = f"#{i} ('{schedule.name}')" if schedule.name else f"#{i}"
                raise ScheduleError(f"replay: schedule {label}: {found[0]}")
        self.space = space
        self._queue = deque(schedules)

    def next_schedule(self) -> Schedule | None:
        return self._queue.popleft() if self._queue else None

    def observe(self, result: RunResult) -> None:
        pass
