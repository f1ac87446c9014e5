"""A persistent worker: one process that runs schedule after schedule while each ends clean.

A ThreadSanitizer target cannot be forked from a zygote that has onnxruntime loaded (TSan cannot
follow a fork of a process with threads, and importing onnxruntime starts one), so each of its
workers would import onnxruntime under TSan itself: about 1.5 s, most of a TSan run (measured,
onnxruntime 1.32.0). This worker pays that once and then serves schedules one at a time. After
each it restores a fresh state (teardown; every library it registered unregistered, with the
shared allocators of their devices); where it cannot (an unregister fails), it exits and the next
schedule gets a new process. What it cannot restore is an EP library's own static state:
onnxruntime does not unload the library (measured with the testbed), which is why the parent
confirms findings in fresh processes.

Whether the next schedule may run here is the parent's call as well: it judges each run, kills
this process after a crash, hang, leak or sanitizer report, and confirms a finding made after
earlier schedules in a fresh process before reporting it (`execute/persistent_pool.py`).

Protocol: requests on stdin, one JSON object per line, `{"job": {...}, "stderr": path}`; the
job's events on stdout as `main.py` writes them, then `{"ev": "served"}` once this process is
clean again and waits for the next request. The request's stderr file receives fd 1 and 2 for
the job (native prints, faulthandler, a sanitizer's report).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import sys

from racefuzz.worker import main as worker_main
from racefuzz.worker import native_trace
from racefuzz.worker.lifeline import exit_when_orphaned
from racefuzz.worker.main import Channel
from racefuzz.worker.protocol import SERVED


def _point_output_at(path: str) -> None:
    """The job's own stderr file for fd 1 and 2, where a crash report or TSan's lands."""
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)


def serve() -> None:
    exit_when_orphaned()  # racefuzz gone, even mid-schedule in a hung EP
    worker_main.no_core_dumps()
    channel = Channel(worker_main.protocol_stream())
    faulthandler.enable(file=sys.stderr, all_threads=True)  # fd 2: whichever job's file is there
    native_trace.install()
    gc.freeze()  # as the zygote: imported objects out of every collection a schedule makes
    for line in sys.stdin:
        request = json.loads(line)
        _point_output_at(str(request["stderr"]))
        runtime = worker_main.run_job_reporting(request["job"], channel)
        sys.stderr.flush()
        if not runtime.restore():
            break
        gc.freeze()  # what lives on (reference sessions, caches) is not walked again
        channel.send({"ev": SERVED})
    os._exit(0)  # as main.py: no interpreter teardown under native libraries


if __name__ == "__main__":
    serve()
