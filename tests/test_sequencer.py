"""The sequencer runs steps one at a time in list order, each on its thread; groups overlap."""

from __future__ import annotations

import threading
import time

from racefuzz.worker.sequencer import Sequencer, Slot


def _record(
    slots: list[Slot], threads: int, work_s: float = 0.0, meet: threading.Barrier | None = None
) -> list[tuple[int, str, str]]:
    """Run the slots, logging each step's start and end. Steps in a group with `meet` wait at
    that barrier: they pass it only if the sequencer released them together (synchronised on
    the steps themselves, not on how long a sleep takes on a loaded machine)."""
    log: list[tuple[int, str, str]] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        with lock:
            log.append((i, threading.current_thread().name, "start"))
        if meet is not None and slots[i].group is not None:
            try:
                meet.wait()
            except threading.BrokenBarrierError:
                with lock:
                    log.append((i, threading.current_thread().name, "alone"))
        time.sleep(work_s)
        with lock:
            log.append((i, threading.current_thread().name, "end"))

    Sequencer(slots, threads, run).run()
    return log


def test_steps_run_in_list_order_one_at_a_time_each_on_its_thread() -> None:
    slots = [Slot(0), Slot(2), Slot(1), Slot(0), Slot(2), Slot(1)]
    log = _record(slots, 3, work_s=0.002)
    starts = [i for i, _, ev in log if ev == "start"]
    assert starts == [0, 1, 2, 3, 4, 5]
    # Strict alternation start/end means no two lone steps ever overlapped.
    assert [ev for _, _, ev in log] == ["start", "end"] * 6
    names = {i: name for i, name, _ in log}
    assert names[0] == names[3] == "MainThread"
    assert names[1] == names[4] == "racefuzz-t2"
    assert names[2] == names[5] == "racefuzz-t1"


def test_steps_of_one_group_overlap_and_the_next_step_waits_for_the_whole_group() -> None:
    slots = [Slot(0), Slot(1, group=7), Slot(2, group=7), Slot(0)]
    log = _record(slots, 3, meet=threading.Barrier(2, timeout=10))
    events = [(i, ev) for i, _, ev in log]
    assert "alone" not in {ev for _, ev in events}  # both were in flight at once
    assert events[-2:] == [(3, "start"), (3, "end")]


def test_an_empty_schedule_returns_at_once() -> None:
    assert _record([], 2) == []
