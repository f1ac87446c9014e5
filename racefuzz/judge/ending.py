"""How one run of a worker ended, told from what the watcher saw: its events, its exit status,
and the limits it was held to (no event for a step timeout, the schedule timeout, a memory
ceiling). racefuzz's executor and `repro.py` (which embeds this module, stdlib only) both feed a
`Watch` and take its `RunResult`, so a replay is the same run to both before `oracles.judge`
and `oracles.evidence` say what it showed.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from racefuzz.judge.oracles import NATIVE_HEADER
from racefuzz.judge.outcome import Check, Exit, RunResult, StepOutcome
from racefuzz.judge.sanitizer_report import extract as sanitizer_reports
from racefuzz.schedule.model import Schedule
from racefuzz.worker.protocol import StepResult

GRACE_S = 1.5  # after a step timeout: time for faulthandler's dump to reach stderr
STDERR_TAIL = 20_000  # how much of stderr a result keeps
# Signals that come from outside a process (`kill`, a terminal, a CI timeout, the OOM killer),
# never from an EP's own fault; the watcher's own kills (hang, memory) are known when it sends them.
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
# Where the part of stderr about a death begins: the crash tracer's native frames, a fatal
# signal's or a watchdog's faulthandler dump.
STACK_MARKS = (NATIVE_HEADER, "Fatal Python error", "Timeout (", "Thread 0x")


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def stack_part(stderr: str) -> str:
    """The part of a worker's stderr from the first mark of a death on, or ''."""
    found = [at for at in (stderr.find(m) for m in STACK_MARKS) if at >= 0]
    return stderr[min(found) :] if found else ""


class Watch:
    """One worker run as its watcher sees it. Feed each event to `event`, and call `limit` when
    none came for a while and after each step done; `limit` says when the worker must be
    killed and why, and `result` tells the run once its exit status is known."""

    def __init__(
        self,
        schedule: Schedule,
        step_timeout: float,
        schedule_timeout: float,
        max_rss_mb: float,
        started: float,
    ) -> None:
        self.schedule = schedule
        self.step_timeout = step_timeout
        self.schedule_timeout = schedule_timeout
        self.max_rss_mb = max_rss_mb
        self.started = started
        self.last_event = started
        self.outcomes: dict[int, StepOutcome] = {}
        self.in_flight: set[int] = set()
        self.ended = False  # the worker said its schedule and teardown were done
        self.internal = ""  # racefuzz's own failure in the worker, its traceback
        self.peak_rss_mb = 0.0
        self.killed_for: Exit | None = None  # HANG or LEAK once `limit` said to kill

    def event(self, ev: Mapping[str, Any], now: float) -> None:
        self.last_event = now
        kind = ev.get("ev")
        if kind == "start":
            self.in_flight.add(int(ev["step"]))
        elif kind == "done":
            i = int(ev["step"])
            self.in_flight.discard(i)
            done = StepResult.from_json(ev)
            self.outcomes[i] = StepOutcome(
                step=i,
                ok=done.ok,
                message=done.message,
                check=Check(done.check) if done.check else None,
                detail=done.detail,
                skipped=done.skipped.value if done.skipped else "",
                ms=float(ev.get("ms", 0.0)),
            )
            self.internal = self.internal or done.internal
        elif kind == "internal":
            self.internal = str(ev.get("traceback") or "no traceback")
        elif kind == "end":
            self.ended = True

    def limit(self, now: float, rss_mb: float | None) -> Exit | None:
        """LEAK or HANG when a limit is passed, and the worker is to be killed, else None;
        `rss_mb` is a reading of its resident memory (None: it could not be read). Called when
        no event came for a while and after each step done: a fast leak ends between polls."""
        if rss_mb is not None:
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb)
        if self.peak_rss_mb > self.max_rss_mb:
            self.killed_for = Exit.LEAK
        elif (
            now - self.last_event > self.step_timeout + GRACE_S
            or now - self.started > self.schedule_timeout
        ):
            self.killed_for = Exit.HANG
        return self.killed_for

    def result(self, returncode: int | None, now: float) -> RunResult:
        """The run, unjudged: how it ended, what finished and what was in flight. An exit code
        alone is never racefuzz's failure (the caller checks `internal`): an EP may exit with
        any code."""
        exit_kind = self.killed_for
        if exit_kind is None:
            if self.ended and returncode == 0:
                exit_kind = Exit.CLEAN
            elif returncode is not None and -returncode in OUTSIDE_SIGNALS:
                exit_kind = Exit.KILLED
            else:
                exit_kind = Exit.CRASH
        died = exit_kind in (Exit.CRASH, Exit.KILLED)
        return RunResult(
            schedule=self.schedule,
            outcomes=tuple(self.outcomes[i] for i in sorted(self.outcomes)),
            exit=exit_kind,
            returncode=returncode,
            signal=signal_name(returncode) if died else None,
            in_flight=tuple(sorted(self.in_flight)),
            seconds=now - self.started,
            peak_rss_mb=round(self.peak_rss_mb, 1),
        )


def with_output(
    result: RunResult, stderr: str, stacks: str, trace: tuple[dict[str, Any], ...]
) -> RunResult:
    """The run with what the worker wrote: its stderr's tail, the stacks of a death (`stacks`,
    `stack_part` of stderr, symbolised where the caller can), the testbed's trace and any
    sanitizer reports."""
    return replace(
        result,
        stderr_tail=stderr[-STDERR_TAIL:],
        stacks=stacks,
        trace=trace,
        sanitizer_reports=sanitizer_reports(stderr),
    )
