"""Runs that can be stopped: `run`, `run_async` (completion on an ORT pool thread) and
`terminate` (RunOptions.terminate on a session's runs).

Every run registers its own RunOptions on its session while it is in flight, so that a
`terminate` step on another thread reaches it. A `terminate` that finds no run in flight arms the
session instead: its next run starts with the flag set (a stop request that reaches the run
before its first kernel, the deterministic form; ORT checks the flag only between kernels, and
the testbed's graph is one fused kernel, so a flag set mid-run either beats compute or is too
late). A run that ends with ORT's terminate error is no finding: it is recorded as ok with a
detail; what the session computes afterwards is checked as usual.

Part of the worker's ops (`Runtime` mixes `RunOps` in); like `ops.py` it imports only the
stdlib, numpy and onnxruntime, and `repro.py` embeds it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import onnxruntime as ort

if TYPE_CHECKING:
    from racefuzz.worker.ops import Outcome, _Session

# ORT's words for a run stopped by RunOptions.terminate (run raises them; run_async hands them
# to the callback as its error).
TERMINATED = "Exiting due to terminate flag being set to true."
# ORT refuses run_async without an intra-op pool thread to complete on (intra_op_num_threads=1;
# its check behind onnxruntime#17149): a limit of the profile's configuration, not a finding.
NO_ASYNC_POOL = "intra op thread pool must have at least one thread for RunAsync"


class _Host(Protocol):
    """What the handlers here use of `Runtime`."""

    sessions: dict[str, _Session]
    runs_in_flight: dict[str, list[Any]]  # session -> RunOptions of its runs in flight
    terminate_armed: set[str]  # sessions whose next run starts terminated
    rtol: float
    atol: float
    _lock: threading.Lock

    def _feeds(self, index: int, session: Any) -> dict[str, np.ndarray[Any, Any]]: ...
    def _reference(self, model: str, feeds: Mapping[str, Any]) -> list[Any]: ...


@contextmanager
def in_flight(host: _Host, session: str) -> Iterator[Any]:
    """A fresh RunOptions for one run of `session`, registered for `terminate` while in use."""
    options = ort.RunOptions()
    with host._lock:
        if session in host.terminate_armed:
            host.terminate_armed.discard(session)
            options.terminate = True
        host.runs_in_flight.setdefault(session, []).append(options)
    try:
        yield options
    finally:
        with host._lock:
            host.runs_in_flight[session].remove(options)


def _terminated(session: str) -> Outcome:
    return {"ok": True, "check": None, "detail": f"terminated: {session} stopped by terminate"}


def _checked(host: _Host, s: _Session, feeds: Mapping[str, Any], outputs: Any) -> Outcome:
    from racefuzz.worker.ops import compare  # ops imports this module first

    check, detail = compare(outputs, host._reference(s.model, feeds), host.rtol, host.atol)
    return {"ok": True, "check": check, "detail": detail}


class RunOps:
    def op_run(self: _Host, index: int, step: Mapping[str, Any]) -> Outcome:
        s = self.sessions[step["session"]]
        feeds = self._feeds(index, s.session)
        with in_flight(self, step["session"]) as options:
            try:
                outputs = s.session.run(None, feeds, options)
            except Exception as e:
                if TERMINATED in str(e):
                    return _terminated(step["session"])
                raise
        return _checked(self, s, feeds, outputs)

    def op_run_async(self: _Host, index: int, step: Mapping[str, Any]) -> Outcome:
        s = self.sessions[step["session"]]
        feeds = self._feeds(index, s.session)
        done, box = threading.Event(), dict[str, Any]()

        def finished(results: Any, user_data: Any, err: str) -> None:  # on an ORT pool thread
            box.update(results=results, err=err)
            done.set()

        with in_flight(self, step["session"]) as options:
            try:
                s.session.run_async(None, feeds, finished, None, options)
            except Exception as e:
                if NO_ASYNC_POOL in str(e):
                    return {"ok": True, "check": None, "detail": f"skipped: {NO_ASYNC_POOL}"}
                raise
            # No timeout of its own: a callback that never comes is the step timeout's hang.
            done.wait()
        err = str(box["err"] or "")
        if TERMINATED in err:
            return _terminated(step["session"])
        if err:
            return {"ok": False, "message": f"RunAsync: {err}", "check": None}
        return _checked(self, s, feeds, box["results"])

    def op_terminate(self: _Host, index: int, step: Mapping[str, Any]) -> Outcome:
        name = step["session"]
        with self._lock:
            runs = list(self.runs_in_flight.get(name, ()))
            if not runs:
                self.terminate_armed.add(name)
        for options in runs:
            options.terminate = True
        if runs:
            return {"ok": True, "detail": f"{len(runs)} run(s) of {name} in flight told to stop"}
        return {"ok": True, "detail": f"no run of {name} in flight: its next run starts terminated"}
