"""The fast path: start workers by forking a pre-initialised zygote (POSIX), not by spawning.

One `ZygoteLauncher` per job slot owns one zygote process (`racefuzz.worker.zygote`) and runs
one schedule at a time through it. The child's events arrive through a file that a thread
tails (the zygote, not racefuzz, is the child's parent, so no pipe to it exists); its exit code
comes back on the zygote's stdout. If the zygote itself dies, the launcher starts a new one for
the next schedule; where fork does not exist (Windows), `available()` is False and callers use
the spawn path. Which path is faster is measured in `bench/`, not assumed.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from racefuzz.execute.executor import Launched, kill_tree, start_line_server, track

# The events file is polled: from 1 ms after news, doubling to 16 ms while quiet. The end of the
# child wakes the poll at once, so a short run is not kept waiting; a quiet one does not take the
# parent's GIL for 500 empty reads a second per job (no gain was measurable on 2 cores).
_TAIL_POLL_MIN_S = 0.001
_TAIL_POLL_MAX_S = 0.016


def available() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


class LauncherClosed(RuntimeError):
    """The job slot that owned this launcher has ended (deadline or Ctrl-C)."""


class ZygoteLauncher:
    def __init__(self) -> None:
        self._closed = False
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()  # one schedule at a time per zygote

    def _zygote(self, env: dict[str, str]) -> subprocess.Popen[str]:
        """The zygote, started (again) if needed with the target's environment in place from
        its first instruction: a loader variable (LD_LIBRARY_PATH, a Vulkan driver list) set
        only in the forked child would come too late for the dynamic loader."""
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                track(self._proc.pid, False)  # it died: its pid may be reused by anyone
            if self._closed:
                raise LauncherClosed("this job slot has ended")
            proc = start_line_server("racefuzz.worker.zygote", env)
            track(proc.pid, True)  # killed with the workers if its slot is abandoned
            if self._closed:  # closed while it started: `close` did not see it
                kill_tree(proc.pid)
                track(proc.pid, False)
                raise LauncherClosed("this job slot has ended")
            self._proc = proc
        return self._proc

    def close(self) -> None:
        self._closed = True  # a task abandoned mid-run must not start a new zygote
        proc, self._proc = self._proc, None  # read once: the reaper thread may clear it too
        if proc is not None:
            if proc.poll() is None:
                kill_tree(proc.pid)
            track(proc.pid, False)

    def launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched:
        if self._closed:
            raise LauncherClosed("this job slot has ended")
        self._lock.acquire()
        try:
            return self._launch(job, env, err_path, tmp)
        except BaseException:
            self._lock.release()
            raise

    def _launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched:
        events_path = tmp / "events.jsonl"
        events_path.touch()
        request = {"job": json.loads(job), "events": str(events_path), "stderr": str(err_path)}
        request["env"] = env
        # A zygote killed from outside (or by the OOM killer) while idle is replaced once; a
        # fresh one that cannot fork either is a real failure.
        for attempt in (1, 2):
            zygote = self._zygote(env)
            assert zygote.stdin is not None and zygote.stdout is not None
            try:
                zygote.stdin.write(json.dumps(request) + "\n")
                zygote.stdin.flush()
                first = zygote.stdout.readline()
            except OSError:
                first = ""
            if first:
                break
            self._proc = None
            kill_tree(zygote.pid)
            track(zygote.pid, False)
            if attempt == 2:
                raise RuntimeError("the zygote died before forking a worker, twice")
        pid = int(json.loads(first)["pid"])
        exit_code: queue.Queue[int | None] = queue.Queue()
        ended = threading.Event()

        def reap() -> None:
            line = zygote.stdout.readline() if zygote.stdout else ""
            try:
                code: int | None = int(json.loads(line)["status"])
            except (ValueError, KeyError):
                code = None  # the zygote died with its child: no status to report
                self._proc = None
            exit_code.put(code)
            ended.set()
            self._lock.release()

        threading.Thread(target=reap, daemon=True).start()
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=_tail, args=(events_path, events, ended), daemon=True).start()
        result: list[int | None] = []

        def wait(timeout: float) -> int | None:
            if not result:
                try:
                    result.append(exit_code.get(timeout=timeout))
                except queue.Empty:
                    return None
            code = result[0]
            return -9 if code is None else code

        return Launched(pid, events, wait)


def _tail(path: Path, events: queue.Queue[dict[str, Any] | None], ended: threading.Event) -> None:
    """Follow the events file until the child has ended and everything written was read."""
    with path.open("r", encoding="utf-8") as f:
        buffer = ""
        delay = _TAIL_POLL_MIN_S
        while True:
            # Read `ended` before reading the file: the child's last lines are written before it
            # exits, so once it has ended, one more read sees all of them. Checking after an
            # empty read instead loses lines written between that read and the check.
            finished = ended.is_set()
            chunk = f.read()
            if chunk:
                delay = _TAIL_POLL_MIN_S
                buffer += chunk
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    try:
                        events.put(json.loads(line))
                    except ValueError:
                        continue
            if finished:
                break
            if not chunk:
                ended.wait(delay)
                delay = min(2 * delay, _TAIL_POLL_MAX_S)
    events.put(None)
