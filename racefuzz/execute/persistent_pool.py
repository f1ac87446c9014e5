"""A job slot whose worker process serves schedule after schedule (`worker/persistent.py`).

For ThreadSanitizer targets, which no zygote can fork with onnxruntime loaded: without it every
TSan schedule pays onnxruntime's import under TSan. One `PersistentLauncher` per job slot owns
one worker process and hands it one schedule at a time; the process is replaced when it dies,
when the target's environment changes, after `MAX_SERVED` schedules (memory a long-lived process
gathers), and when `settle` says the last run did not leave it whole.

A finding made after earlier schedules in the same process may be theirs as much as its own:
`confirm` runs the schedule again in fresh processes and keeps the first failure it sees there,
unless a fresh process has already shown a finding of that identity. Only a confirmed finding is
reported; one that is never confirmed is written, with the schedules that ran before it, to the
campaign's `unconfirmed/` folder, never dropped.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from racefuzz.execute.executor import Launched, kill_tree, start_line_server, track
from racefuzz.execute.zygote_pool import LauncherClosed
from racefuzz.judge.identity import ClusterKey
from racefuzz.judge.outcome import Exit, RunResult
from racefuzz.worker.protocol import SERVED

MAX_SERVED = 400
CONFIRM_TRIES = 3  # fresh runs that may show a finding first seen after earlier schedules
_HISTORY = 50  # earlier schedules kept for an unconfirmed finding's record


class PersistentLauncher:
    """`trace_vars`: the variables that name a run's trace file (`Target.trace_envs`). An EP
    library stays loaded across schedules (onnxruntime's unregister does not unload the testbed,
    measured), so it keeps the file it opened first: the process gets one file of its own, and
    each run's part of it is copied to the file the run named."""

    def __init__(self, trace_vars: tuple[str, ...] = ()) -> None:
        self._trace_vars = frozenset(trace_vars)
        self._trace_dir = tempfile.TemporaryDirectory(prefix="racefuzz-persistent-")
        self._trace = Path(self._trace_dir.name, "trace.jsonl")
        self._closed = False
        self._proc: subprocess.Popen[str] | None = None
        self._env: dict[str, str] = {}
        self._served = 0  # schedules the current process ran to a clean end
        self.earlier: tuple[str, ...] = ()  # the jobs the last schedule's process ran before it
        self._history: deque[str] = deque(maxlen=_HISTORY)
        self._lock = threading.Lock()  # one schedule at a time per process

    def _worker(self, env: dict[str, str]) -> subprocess.Popen[str]:
        proc = self._proc
        if proc is not None and (
            proc.poll() is not None or env != self._env or self._served >= MAX_SERVED
        ):
            self.retire()
            proc = None
        if proc is None:
            if self._closed:
                raise LauncherClosed("this job slot has ended")
            proc = start_line_server("racefuzz.worker.persistent", env)
            track(proc.pid, True)
            self._proc, self._env, self._served = proc, dict(env), 0
            self._history.clear()
            self._trace.unlink(missing_ok=True)  # a new process opens it anew
        return proc

    @property
    def process_id(self) -> int | None:
        """The worker process serving this slot now (None: none yet, or retired)."""
        return self._proc.pid if self._proc is not None else None

    def retire(self) -> None:
        """End the current process: the next schedule starts a fresh one."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                kill_tree(proc.pid)
            track(proc.pid, False)

    def close(self) -> None:
        self._closed = True
        self.retire()
        self._trace_dir.cleanup()

    def settle(self, result: RunResult) -> None:
        """After the last run was judged: keep the process only if it ended the run whole (an
        error an EP returned leaves it so; a crash, hang, leak or sanitizer report does not)."""
        if result.exit is not Exit.CLEAN or result.sanitizer_reports:
            self.retire()

    def launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched:
        if self._closed:
            raise LauncherClosed("this job slot has ended")
        run_trace = next((env[k] for k in self._trace_vars if k in env), None)
        env = {k: str(self._trace) if k in self._trace_vars else v for k, v in env.items()}
        self._lock.acquire()
        try:
            proc = self._worker(env)
            start = self._trace.stat().st_size if self._trace.exists() else 0
            self.earlier = tuple(self._history)
            assert proc.stdin is not None and proc.stdout is not None
            request = {"job": json.loads(job), "stderr": str(err_path)}
            try:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
            except OSError:
                pass  # it died while idle: the empty stream and its exit code say so
            self._history.append(job)
        except BaseException:
            self._lock.release()
            raise
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        served = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # a torn last line from a dying worker
                    if event.get("ev") == SERVED:
                        self._served += 1
                        served.set()
                        break
                    events.put(event)
            except (OSError, ValueError):
                pass  # its pipe closed under us: killed
            finally:
                if run_trace is not None:
                    _copy_tail(self._trace, start, Path(run_trace))
                events.put(None)
                self._lock.release()

        threading.Thread(target=pump, daemon=True).start()

        def wait(timeout: float) -> int | None:
            if served.is_set():
                return 0
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return 0 if served.is_set() else None

        return Launched(proc.pid, events, wait)


def _copy_tail(source: Path, start: int, dest: Path) -> None:
    """What was appended to `source` from byte `start` on, written to `dest`."""
    try:
        with source.open("rb") as f:
            f.seek(start)
            dest.write_bytes(f.read())
    except OSError:
        pass  # nothing traced yet (no file), or the run's folder is gone: no trace to keep


def confirm(
    result: RunResult,
    launcher: PersistentLauncher,
    rerun: Callable[[], RunResult],
    record: Callable[[RunResult, tuple[str, ...]], None],
    confirmed: set[ClusterKey],
) -> RunResult:
    """`result`, settled. A finding made after earlier schedules in its process, whose identity
    no fresh process has shown yet (`confirmed`, the command's), is reported only as a fresh
    process shows it (`rerun`, up to CONFIRM_TRIES times); else it is given to `record` with the
    jobs that ran before it, and the last fresh (clean) run is returned. Once an identity is
    confirmed, later findings of it are taken as they come: a defect that fails one run in two
    would otherwise cost a fresh process every other run."""
    earlier = launcher.earlier
    launcher.settle(result)
    keys = {f.key for f in result.findings}
    if not earlier or keys <= confirmed:
        confirmed |= keys
        return result
    fresh = result
    for _ in range(CONFIRM_TRIES):
        launcher.retire()  # each try in a process of its own
        fresh = rerun()
        launcher.settle(fresh)
        if fresh.failed:
            confirmed |= {f.key for f in fresh.findings}
            return fresh
    record(result, earlier)
    return fresh
