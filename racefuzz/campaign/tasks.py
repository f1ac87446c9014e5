"""The work about findings (baselines, shrinks) that a campaign's job slots take between
schedules, and how the slots share their time between it and fuzzing.

Tasks run in job threads and may queue tasks (a baseline queues its cluster's shrink), so the
heap is locked; the slots' bookkeeping is touched only from trio's thread.
"""

from __future__ import annotations

import heapq
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from racefuzz.execute.zygote_pool import LauncherClosed
from racefuzz.judge.outcome import Finding

if TYPE_CHECKING:
    from racefuzz.execute.executor import Launcher

Task = Callable[["Launcher | None"], None]

BASELINE, SHRINK = 0, 2  # priorities: a cluster's baseline before any shrink


class TaskQueue:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._heap: list[tuple[int, int, str, Task]] = []  # (priority, order, label, task)
        self._order = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition()  # tasks running in threads, abandoned ones too
        self._running = 0
        self.slots = 0  # slots busy with tasks now
        self.task_s = 0.0  # time spent on tasks and on fuzzing, for sharing one slot fairly
        self.fuzz_s = 0.0

    def __bool__(self) -> bool:
        return bool(self._heap)

    def add(self, priority: int, finding: Finding, label: str, task: Task) -> None:
        """Queue `task`; within a priority, black-box findings first (a misroute, the
        testbed's white-box trace, usually shadows one of them), then first come."""
        with self._lock:
            self._order += 1
            rank = priority + (finding.kind == "misroute")
            heapq.heappush(self._heap, (rank, self._order, label, task))

    def take(self) -> tuple[str, Task]:
        with self._lock:
            _, _, label, task = heapq.heappop(self._heap)
        return label, task

    def may_take(self, fuzzing: bool) -> bool:
        """Tasks never starve fuzzing: at most half the slots, or half the time of a lone one.
        A baseline (a run or two) is taken at once all the same: behind a long shrink it waited
        out whole campaigns, leaving its cluster unclassified and unshrunk."""
        if not self._heap:
            return False
        if not fuzzing or self._heap[0][0] < SHRINK:
            return True
        if self.jobs > 1:
            return self.slots < self.jobs // 2
        return self.task_s <= self.fuzz_s

    def lent(self, seconds: float) -> None:
        """A task's slot fuzzed for `seconds`: fuzzing's time, not the task's."""
        with self._lock:
            self.fuzz_s += seconds
            self.task_s -= seconds

    def guarded(self, task: Task, launcher: Launcher | None) -> tuple[str, Exception | None]:
        """Run a task in this thread; its own exception is a bug in racefuzz (its traceback,
        never a finding) unless it is the output folder failing."""
        with self._idle:
            self._running += 1
        try:
            task(launcher)
        except LauncherClosed:
            pass  # the slot ended (deadline or Ctrl-C) while the task ran
        except Exception as e:
            return traceback.format_exc(), e
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()
        return "", None

    def settle(self, timeout_s: float) -> bool:
        """Wait for the tasks a deadline abandoned (their workers killed, they end at once) to
        finish writing: a shrink ended halfway would leave its replaced bundle on disk, or a
        bundle its cluster never lists. False when one still runs after `timeout_s`."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout_s)
