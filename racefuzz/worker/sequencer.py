"""Runs a schedule's steps on real threads, one at a time, in the exact order written.

All threads exist before the first step. Thread 0 is the process's main thread (the baseline of
a finding is "its session alone, on the main thread", so thread 0 must be the main thread). A
baton (`_next`, guarded by one condition variable) says which step may run; only the thread that
owns that step takes it, runs it, and passes the baton on. A run of steps that share a `group`
is taken together: each member waits at a barrier so that the native calls truly overlap, and
the baton moves past the group when its last member finishes.

Scheduling points (`holds.py`): with the EP-ABI layer, a step may park inside the EP (a `hold`
armed its session's point). A watcher thread sees the park and counts the step as *suspended*:
the baton moves on as if it had finished. A `resume` step releases its session's parked threads
and waits until their steps really finish. A parked thread whose next step comes up, and every
parked thread at the end, is released without one, so no schedule waits on itself.

Stdlib only: `repro.py` embeds this file's source so that a bug report replays without racefuzz.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

# How often the watcher asks the layer for parked threads (a notify wakes it sooner).
WATCH_S = 0.0005


@dataclass(frozen=True)
class Slot:
    """What the sequencer needs of a step: its thread, its group, its jitter; for scheduling
    points, the session it works on, whether it arms a hold and whether it is a resume."""

    thread: int
    group: int | None = None
    jitter_us: int = 0
    session: str | None = None
    arms: bool = False
    resumes: bool = False


class Holds(Protocol):
    """The layer's side of scheduling points (`holds.LayerHolds`)."""

    def parked(self) -> Counter[str]: ...

    def resume(self, session: str | None) -> None: ...


class Sequencer:
    def __init__(
        self,
        slots: Sequence[Slot],
        threads: int,
        run_step: Callable[[int], None],
        barrier_timeout: float = 60.0,
        holds: Holds | None = None,
    ) -> None:
        self._slots = list(slots)
        # Watched only where a step arms a point: other schedules pay nothing.
        self._holds = holds if any(s.arms for s in self._slots) else None
        self._suspended: dict[int, str] = {}  # step -> its session, parked in the layer
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
        if self._holds is not None:
            workers.append(threading.Thread(target=self._watch, name="racefuzz-holds", daemon=True))
        for w in workers:
            w.start()
        self._loop(0)
        for w in workers:
            w.join()

    def _watch(self) -> None:
        """Sees parks, moves the baton past suspended steps, releases what must not wait."""
        assert self._holds is not None
        with self._cond:
            while len(self._finished) < len(self._slots):
                self._see_parks(self._holds)
                self._cond.wait(WATCH_S)

    def _see_parks(self, holds: Holds) -> None:
        """Under the condition: suspend the baton's steps that newly parked, and release a parked
        thread the schedule needs (its next step is up, or no step is left)."""
        waiting = {i: s for i, s in self._suspended.items() if i not in self._finished}
        if self._next < len(self._slots):
            start, end = self._next, self._unit_end(self._next)
            new = holds.parked() - Counter(waiting.values())
            for i in range(start, end):
                session = self._slots[i].session
                running = i in self._taken and i not in self._finished and i not in waiting
                if running and session is not None and new[session] > 0:
                    new[session] -= 1
                    self._suspended[i] = waiting[i] = session
            if all(i in self._finished or i in waiting for i in range(start, end)):
                self._next = end
                self._cond.notify_all()
            threads = {self._slots[i].thread for i in range(self._next, self._unit_end(self._next))}
            needed = {s for i, s in waiting.items() if self._slots[i].thread in threads}
        else:
            needed = set(waiting.values())
        for session in needed:
            holds.resume(session)

    def _resume(self, index: int) -> None:
        """A `resume` step: release its session's parked threads, wait for their steps."""
        session = self._slots[index].session
        if self._holds is None or session is None:
            return
        self._holds.resume(session)
        with self._cond:
            while any(s == session and i not in self._finished for i, s in self._suspended.items()):
                self._cond.wait()

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
            if self._slots[index].resumes:
                self._resume(index)
            self._run_step(index)
            with self._cond:
                self._finished.add(index)
                done = (i in self._finished or i in self._suspended for i in range(start, end))
                if self._next == start and all(done):
                    self._next = end
                if self._holds is not None or self._next == end:
                    self._cond.notify_all()
