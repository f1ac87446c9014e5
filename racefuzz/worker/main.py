"""The worker process: reads one job, runs its schedule, streams what each step did.

Protocol (parent <- worker), one JSON object per line on a private copy of the original stdout
(fd 1 itself is pointed at stderr, so a native library printing to stdout cannot corrupt it):
`{"ev": "ready"}`, then per step `{"ev": "start", "step": i}` and
`{"ev": "done", "step": i, **StepResult.to_json(), "ms": ...}` (`protocol.py`), then
`{"ev": "end"}`. When racefuzz's own code fails (a step's result carries `internal`, or the worker
itself raised), the worker sends `{"ev": "internal", "traceback": ...}` and exits at once with
WORKER_BUG_EXIT: that event, never the exit code, tells the parent the failure is racefuzz's.
Each line is flushed as it is written, so a crash loses nothing before it.

Stacks: faulthandler dumps every thread's Python stack to stderr on a fatal signal, and a
watchdog (rearmed at every step start) dumps them when a step overruns its timeout, just
before the parent kills the process. The parent reads stderr afterwards.

The job (parent -> worker, JSON on stdin): `{"schedule": <schedule JSON>, "libraries":
{name: path}, "profiles": {name: {...}}, "models": {name: path}, "seed": int,
"step_timeout": float, "env_api": path | null}` (the last: `racefuzz/native/envapi.c` built).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import IO, Any, NoReturn

from racefuzz.worker import WORKER_BUG_EXIT, native_trace
from racefuzz.worker.base import Profile
from racefuzz.worker.lifeline import die_with_parent
from racefuzz.worker.ops import Runtime
from racefuzz.worker.sequencer import Sequencer, Slot


class Channel:
    """Thread-safe, line-flushed event stream to the parent."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, event: Mapping[str, Any]) -> None:
        line = json.dumps(event, default=str) + "\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


def run_job(job: Mapping[str, Any], channel: Channel) -> Runtime:
    schedule = job["schedule"]
    steps: list[dict[str, Any]] = schedule["steps"]
    step_timeout = float(job.get("step_timeout", 10.0))
    profiles = {n: Profile.from_json(n, d) for n, d in job["profiles"].items()}
    runtime = Runtime(
        job["libraries"],
        profiles,
        job["models"],
        int(job.get("seed", 0)),
        env_api=job.get("env_api"),
    )
    if job.get("tolerance"):
        runtime.rtol, runtime.atol = (float(x) for x in job["tolerance"])
    runtime.measure = bool(job.get("measure"))

    def run_step(index: int) -> None:
        # On any of the sequencer's threads, where an exception would only end that thread.
        try:
            # Rearmed per step: the dump fires only if this step (or its group) overruns.
            faulthandler.dump_traceback_later(step_timeout, exit=False, file=sys.stderr)
            channel.send({"ev": "start", "step": index})
            t0 = time.perf_counter()
            result = runtime.step(index, steps[index])
            ms = round((time.perf_counter() - t0) * 1000, 3)
            channel.send({"ev": "done", "step": index, **result.to_json(), "ms": ms})
        except Exception:
            internal_failure(channel, traceback.format_exc())
        if result.internal:  # later steps would run on a racefuzz that is known to be wrong
            internal_failure(channel, result.internal)

    slots = [slot_of(s) for s in steps]
    channel.send({"ev": "ready"})
    Sequencer(slots, int(schedule["threads"]), run_step, holds=runtime.holds).run()
    # Teardown is one more step (index len(steps)): a native crash while freeing what the
    # schedule left alive, e.g. after an unregister, must be attributed to something.
    faulthandler.dump_traceback_later(step_timeout, exit=False, file=sys.stderr)
    channel.send({"ev": "start", "step": len(steps)})
    channel.send({"ev": "done", "step": len(steps), **runtime.teardown().to_json()})
    faulthandler.cancel_dump_traceback_later()
    channel.send({"ev": "end"})
    return runtime


def slot_of(step: Mapping[str, Any]) -> Slot:
    op = step["op"]
    return Slot(
        step["thread"],
        step.get("group"),
        int(step.get("jitter_us", 0)),
        session=step.get("session"),
        arms=op == "hold",
        resumes=op == "resume",
    )


def internal_failure(channel: Channel, text: str) -> NoReturn:
    """racefuzz's own failure: the `internal` event with its traceback, then exit 70 at once
    (from any thread): a bug in racefuzz is reported as one, never as an EP crash."""
    channel.send({"ev": "internal", "traceback": text})
    sys.stderr.flush()
    os._exit(WORKER_BUG_EXIT)


def run_job_reporting(job: Mapping[str, Any] | None, channel: Channel) -> Runtime:
    """`run_job`, with racefuzz's own exceptions reported by `internal_failure`; `job` None:
    read it from stdin first (a failure to read it is racefuzz's too)."""
    try:
        return run_job(json.loads(sys.stdin.read()) if job is None else job, channel)
    except Exception:
        internal_failure(channel, traceback.format_exc())


def protocol_stream() -> IO[str]:
    """Keep the real stdout for the protocol; send fd 1 (native prints) to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def no_core_dumps() -> None:
    """A crashing worker is what racefuzz is for: it must not write a core file each time
    (with a GPU driver mapped, one may take gigabytes of disk and minutes of I/O)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # POSIX only

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> None:
    die_with_parent(os.getppid())
    no_core_dumps()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    native_trace.install()
    run_job_reporting(None, Channel(protocol_stream()))
    sys.stderr.flush()
    # Skip interpreter teardown: native libraries tearing down after a schedule that left
    # sessions alive are not what this run is about (a crash there would be misattributed).
    os._exit(0)


if __name__ == "__main__":
    main()
