"""The zygote: a pre-initialised process that forks one fresh worker per schedule (POSIX only).

Starting an interpreter and importing numpy and onnxruntime costs far more than running a small
schedule. The zygote pays it once: it imports them (without creating ORT's environment or
loading any EP library, so that every child starts with a fresh ORT environment, reads its own
bug switches and registers its libraries itself) and then forks a child per request. An ASan
target's zygote is started with the sanitizer's runtime preloaded, so its children have it (a
TSan target's cannot fork with onnxruntime loaded: `persistent.py` serves it instead).

Protocol on stdin/stdout, one JSON object per line. Request: `{"job": {...}, "events": path,
"stderr": path, "env": {...}}`. Replies: `{"pid": n}` once the child exists, then
`{"pid": n, "status": code}` when it has ended (code as `os.waitstatus_to_exitcode`: negative
for a signal). The child writes its protocol events to the `events` file, line by line.
One child at a time: each job slot of a campaign has its own zygote.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import signal
import sys
import traceback

import numpy  # noqa: F401  (imported here so that children inherit it)

from racefuzz.worker import WORKER_BUG_EXIT, native_trace
from racefuzz.worker.lifeline import die_with_parent, exit_when_orphaned


def _child(request: dict[str, object], zygote: int) -> None:
    from racefuzz.worker import main as worker_main  # the zygote's own

    die_with_parent(zygote)  # a killed zygote takes its child along, never orphans it
    worker_main.no_core_dumps()
    err_fd = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(err_fd, 2)
    os.dup2(err_fd, 1)  # native prints land in the stderr file, never in the protocol
    os.setsid()  # its own session: the executor can kill its whole tree
    env = request.get("env")
    if isinstance(env, dict):
        os.environ.update({str(k): str(v) for k, v in env.items()})
    sys.stdout = sys.stderr = os.fdopen(2, "w", buffering=1)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    native_trace.install()  # after faulthandler: it runs first, then hands over
    events = open(str(request["events"]), "w", encoding="utf-8", buffering=1)  # noqa: SIM115
    job = request["job"]
    assert isinstance(job, dict)
    worker_main.run_job_reporting(job, worker_main.Channel(events))
    events.flush()
    sys.stderr.flush()
    os._exit(0)


def _report(request: dict[str, object]) -> None:
    """The child's own failure before its worker could report one: the `internal` event, in the
    events file, so that the parent knows it for racefuzz's (exit code 70 alone says nothing)."""
    with contextlib.suppress(Exception), open(str(request["events"]), "a", encoding="utf-8") as f:
        f.write(json.dumps({"ev": "internal", "traceback": traceback.format_exc()}) + "\n")


def _kill_group(*pids: int) -> None:
    """Children and what they started (each is its own session's leader, `_child`)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def serve() -> None:
    from racefuzz.worker import main  # noqa: F401  (onnxruntime too: children inherit it)

    # Everything imported so far lives as long as the zygote: out of every child's collections.
    # A worker collects after each release and at teardown, and a full collection walked (and,
    # writing its headers, copied page by page from the zygote) every imported object: 15 ms
    # of a 25 ms register-only run (measured).
    gc.freeze()
    running: list[int] = []  # the child being waited for, if any
    # racefuzz (or the Ray actor of a fleet node) gone: its child goes too, hung or not.
    exit_when_orphaned(lambda: _kill_group(*running))
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        out.flush()
        me = os.getpid()
        pid = os.fork()  # type: ignore[attr-defined,unused-ignore]
        if pid == 0:
            try:
                _child(request, me)
            except Exception:
                _report(request)
            finally:
                os._exit(WORKER_BUG_EXIT)
        running.append(pid)
        try:
            out.write(json.dumps({"pid": pid}) + "\n")
            out.flush()
            _, status = os.waitpid(pid, 0)
            running.clear()
            code = os.waitstatus_to_exitcode(status)
            out.write(json.dumps({"pid": pid, "status": code}) + "\n")
            out.flush()
        except BrokenPipeError:
            # racefuzz is gone or closed this job slot (deadline, Ctrl-C, SIGTERM): end quietly
            # with the child, instead of a traceback on the terminal racefuzz shared with us.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os._exit(0)


if __name__ == "__main__":
    serve()
