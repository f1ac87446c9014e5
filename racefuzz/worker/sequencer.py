"""Runs a schedule's steps on real threads, one at a time, in the exact order written.

All threads exist before the first step. Thread 0 is the process's main thread (the baseline of
a finding is "its session alone, on the main thread", so thread 0 must be the main thread). A
baton (`_next`, guarded by one condition variable) says which step may run; only the thread that
owns that step takes it, runs it, and passes the baton on. A run of steps that share a `group`
is taken together: each member waits at a barrier so that the native calls truly overlap, and
the baton moves past the group when its last member finishes.

Stdlib only: `repro.py` embeds this file's source so that a bug report replays without racefuzz.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """What the sequencer needs of a step: its thread, its group, its jitter."""

    thread: int
    group: int | None = None
    jitter_us: int = 0


class Sequencer:
    def __init__(
        self,
        slots: Sequence[Slot],
        threads: int,
        run_step: Callable[[int], None],
        barrier_timeout: float = 60.0,
    ) -> None:
        self._slots = list(slots)
        self._threads = threads
        self._run_step = run_step  # must not raise: the worker turns errors into outcomes
        self._cond = threading.Condition()
        # The baton: steps before `_next` are done; the unit [_next, _unit_end) is being run.
        # A unit is one lone step or one whole overlap group.
        self._next = 0
        self._taken: set[int] = set()
        self._finished: set[int] = set()
        self._barriers = {
            start: threading.Barrier(self._unit_end(start) - start, timeout=barrier_timeout)
            for start in range(len(self._slots))
            if self._slots[start].group is not None
            and (start == 0 or self._slots[start - 1].group != self._slots[start].group)
        }

    def _unit_end(self, start: int) -> int:
        g, j = self._slots[start].group, start + 1
        while g is not None and j < len(self._slots) and self._slots[j].group == g:
            j += 1
        return j

    def run(self) -> None:
        """Run every step; returns once all threads are done."""
        workers = [
            threading.Thread(target=self._loop, args=(t,), name=f"racefuzz-t{t}", daemon=True)
            for t in range(1, self._threads)
        ]
        for w in workers:
            w.start()
        self._loop(0)
        for w in workers:
            w.join()

    def _take(self, thread: int) -> tuple[int, int, int] | None:
        """Wait until the baton's unit holds a step of this thread: (index, unit start, end)."""
        with self._cond:
            while self._next < len(self._slots):
                start = self._next
                end = self._unit_end(start)
                for i in range(start, end):
                    if self._slots[i].thread == thread and i not in self._taken:
                        self._taken.add(i)
                        return i, start, end
                self._cond.wait()
            return None

    def _loop(self, thread: int) -> None:
        while (got := self._take(thread)) is not None:
            index, start, end = got
            if end - start > 1:
                # A member that never arrives breaks the barrier; run anyway so an outcome
                # is recorded.
                with contextlib.suppress(threading.BrokenBarrierError):
                    self._barriers[start].wait()
            jitter = self._slots[index].jitter_us
            if jitter:
                time.sleep(jitter / 1e6)
            self._run_step(index)
            with self._cond:
                self._finished.add(index)
                if all(i in self._finished for i in range(start, end)):
                    self._next = end
                    self._cond.notify_all()
