"""How long a step may take before it has hung, once the target has been seen to hang.

Until a run hangs, a step has the configured timeout (20 s): a slow first GPU compile is no
hang. Once one has, every later run of the same runner (fuzzing, a shrink's replays, baselines)
judges a step hung at `HANG_FACTOR` times the slowest step any of its runs finished, and at
least `HANG_FLOOR_S`: an EP with a hanging backend otherwise spends every slot's time waiting
out timeouts (measured: 24 schedules in a 300 s campaign on the testbed with `hang:mgx`).
"""

from __future__ import annotations

import threading

from racefuzz.judge.outcome import Exit, RunResult

HANG_FACTOR = 2.0
HANG_FLOOR_S = 3.0


class HangLimit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.slowest_s = 0.0  # the slowest step that finished, over every run observed
        self.hung = False

    def observe(self, result: RunResult) -> None:
        slowest = max((o.ms for o in result.outcomes), default=0.0) / 1000
        with self._lock:
            self.slowest_s = max(self.slowest_s, slowest)
            self.hung = self.hung or result.exit is Exit.HANG

    def step_timeout(self, configured: float) -> float:
        """The timeout the next run's steps get, never above `configured`."""
        with self._lock:
            if not self.hung:
                return configured
            return min(configured, max(HANG_FLOOR_S, HANG_FACTOR * self.slowest_s))
