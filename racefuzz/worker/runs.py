"""Runs that can be stopped: `run`, `run_async` (completion on an ORT pool thread) and
`terminate` (RunOptions.terminate on a session's runs).

Every run registers its own RunOptions on its session while it is in flight, so that a
`terminate` step on another thread reaches it. A `terminate` that finds no run in flight arms the
session instead: its next run starts with the flag set (a stop request that reaches the run
before its first kernel, the deterministic form; ORT checks the flag only between kernels, and
the testbed's graph is one fused kernel, so a flag set mid-run either beats compute or is too
late). A run that ends with ORT's terminate error is no finding: it is recorded as ok with a
detail; what the session computes afterwards is checked as usual.

Part of the worker's ops (`Runtime` mixes `RunOps` in); imports only the stdlib, onnxruntime and
`base`/`protocol`, and `repro.py` embeds it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import onnxruntime as ort

from racefuzz.worker.base import Host, Session, compare, model_tolerance, own_code
from racefuzz.worker.handoff import intra_op_pool_size
from racefuzz.worker.protocol import Skip, StepResult

own_code(__file__)

# ORT's words for a run stopped by RunOptions.terminate (run raises them; run_async hands them
# to the callback as its error).
TERMINATED = "Exiting due to terminate flag being set to true."
# ORT refuses run_async without an intra-op pool thread to complete on (intra_op_num_threads=1;
# its check behind onnxruntime#17149): a limit of the profile's configuration, not a finding.
NO_ASYNC_POOL = "intra op thread pool must have at least one thread for RunAsync"


@contextmanager
def in_flight(host: Host, session: str) -> Iterator[Any]:
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


def _terminated(session: str) -> StepResult:
    return StepResult(detail=f"terminated: {session} stopped by terminate")


def _checked(host: Host, s: Session, feeds: Mapping[str, Any], outputs: Any) -> StepResult:
    rtol, atol = model_tolerance(s.model, host.rtol, host.atol)
    check, detail = compare(outputs, host._reference(s.model, feeds), rtol, atol, host.measure)
    return StepResult.checked(check, detail)


class RunOps:
    def op_run(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        s = self.sessions[step["session"]]
        feeds = self._feeds(index, s.session, step.get("dims", ()))
        with in_flight(self, step["session"]) as options:
            try:
                outputs = s.session.run(None, feeds, options)
            except Exception as e:
                if TERMINATED in str(e):
                    return _terminated(step["session"])
                raise
        return _checked(self, s, feeds, outputs)

    def op_run_async(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        s = self.sessions[step["session"]]
        feeds = self._feeds(index, s.session, step.get("dims", ()))
        done, box = threading.Event(), dict[str, Any]()

        def finished(results: Any, user_data: Any, err: str) -> None:  # on an ORT pool thread
            box.update(results=results, err=err)
            done.set()

        with in_flight(self, step["session"]) as options:
            try:
                s.session.run_async(None, feeds, finished, None, options)
            except Exception as e:
                # ORT refuses RunAsync without intra-op worker threads (a pool of one thread
                # has none): a skip where the pool is that small, an error where it is not (a
                # regression of onnxruntime#17149 would hide behind a blanket skip).
                if NO_ASYNC_POOL in str(e) and intra_op_pool_size(s.profile) < 2:
                    return StepResult.skip(Skip.UNSUPPORTED, NO_ASYNC_POOL)
                raise
            # No timeout of its own: a callback that never comes is the step timeout's hang.
            done.wait()
        err = str(box["err"] or "")
        if TERMINATED in err:
            return _terminated(step["session"])
        if err:
            return StepResult.error(f"RunAsync: {err}")
        return _checked(self, s, feeds, box["results"])

    def op_terminate(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        name = step["session"]
        with self._lock:
            runs = list(self.runs_in_flight.get(name, ()))
            if not runs:
                self.terminate_armed.add(name)
        for options in runs:
            options.terminate = True
        if runs:
            return StepResult(detail=f"{len(runs)} run(s) of {name} in flight told to stop")
        return StepResult(detail=f"no run of {name} in flight: its next run starts terminated")
