"""Runs one schedule in a fresh worker process and says what happened, whatever happens.

Portable by construction: by default the worker is started with `sys.executable -m
racefuzz.worker` (spawn semantics: no fork, so Windows stays possible), its events are read by a
thread (pipes cannot be polled portably), and a runaway worker's whole process tree is killed
with psutil. A `Launcher` may start it otherwise (the POSIX zygote of `zygote_pool` forks it
from a pre-initialised process); supervision is the same either way.

The parent enforces a per-step timeout (no event for that long while a step is in flight is a
hang), a per-schedule timeout, and a memory ceiling. Crashes, hangs and the ceiling become
`RunResult`s; nothing the EP does raises here. racefuzz's own failure in the worker raises
`InternalError`, however many steps had finished: the worker says so (an `internal` event, or a
step result carrying `internal`); an exit code alone never does, since an EP may exit with any.
Findings are attached by `oracles.judge`.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import psutil

from racefuzz.errors import InternalError
from racefuzz.execute import native_build, native_stack
from racefuzz.judge import ending, oracles
from racefuzz.judge.ending import Watch
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.json_io import to_json_obj
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import C_API_OPS
from racefuzz.targets import models, sanitizer
from racefuzz.targets.model import Target
from racefuzz.worker.native_trace import TRACER_ENV

_DETACH: dict[str, Any] = (
    {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
    if sys.platform == "win32"
    else {"start_new_session": True}
)


@dataclass(frozen=True)
class RunOptions:
    step_timeout: float = 20.0
    schedule_timeout: float = 180.0
    seed: int = 0
    max_rss_mb: float = 4096.0
    measure: bool = False  # ok checks say their largest differences (racefuzz doctor)


def job_for(target: Target, schedule: Schedule, options: RunOptions) -> dict[str, Any]:
    """The JSON job a worker runs: names resolved to paths, aliases to target profiles."""
    # Keyed by the schedule's own names: an alias resolves to the target's profile here.
    profiles = {name: target.profile(name).to_json() for name in sorted(schedule.profiles())}
    return {
        "schedule": to_json_obj(schedule),
        "libraries": {lib.name: str(lib.path) for lib in target.libraries},
        "profiles": profiles,
        "models": {m: str(models.model_path(m)) for m in sorted(schedule.models())},
        "seed": options.seed,
        "step_timeout": options.step_timeout,
        "tolerance": list(target.tolerance) if target.tolerance else None,
        "env_api": _env_api(schedule),
    } | ({"measure": True} if options.measure else {})


def _env_api(schedule: Schedule) -> str | None:
    """The built C API helper, for a schedule that needs it (`share`)."""
    if not C_API_OPS & set(schedule.ops()):
        return None
    built = native_build.library("envapi")
    return str(built) if built else None


# Every worker (and zygote) this process has started and not yet seen end: whatever thread
# started it, and even if that thread was abandoned, `kill_all` finds it, so that no worker of
# a hung EP outlives racefuzz. Counted: a persistent worker is tracked by its slot and by each
# run it serves.
_LIVE: collections.Counter[int] = collections.Counter()
_LIVE_LOCK = threading.Lock()


def track(pid: int, alive: bool) -> None:
    with _LIVE_LOCK:
        _LIVE[pid] += 1 if alive else -1
        if _LIVE[pid] <= 0:
            del _LIVE[pid]


def kill_all() -> None:
    """Kill every tracked worker's process tree (a campaign's end, Ctrl-C, exit)."""
    with _LIVE_LOCK:
        pids = list(_LIVE)
        _LIVE.clear()
    for pid in pids:
        kill_tree(pid)


atexit.register(kill_all)


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    # A killed descendant whose parent died with it is a zombie until its new parent (init)
    # reaps it, which may take most of a second: dead, not reaped, is what matters here.
    deadline = time.monotonic() + 5
    for p in procs:
        while not _dead(p) and time.monotonic() < deadline:
            time.sleep(0.002)
    with contextlib.suppress(psutil.NoSuchProcess):
        if root.ppid() == os.getpid():  # ours to reap, or it stays a zombie
            psutil.wait_procs([root], timeout=max(0.0, deadline - time.monotonic()))


def _dead(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _pump(stream: IO[bytes], q: queue.Queue[dict[str, Any] | None]) -> None:
    for raw in stream:
        try:
            q.put(json.loads(raw))
        except ValueError:
            continue  # a torn last line from a dying worker carries nothing we can use
    q.put(None)


# How much of a worker's stderr is read: all of it up to the cap, else its head (where a crash's
# stacks begin) and its tail. Two threads faulting at once can make faulthandler print "Fatal
# Python error" until the stack runs out: megabytes, in every finding and bundle.
STDERR_CAP = 2 << 20
STDERR_HEAD = 1 << 20
STDERR_END = 512 << 10


def read_capped(path: Path) -> str:
    try:
        f = path.open("rb")
    except FileNotFoundError:  # a forked worker killed before it opened its stderr file
        return ""
    with f:
        data = f.read(STDERR_CAP + 1)
        if len(data) > STDERR_CAP:
            size = f.seek(0, os.SEEK_END)
            f.seek(size - STDERR_END)
            cut = size - STDERR_HEAD - STDERR_END
            data = data[:STDERR_HEAD] + f"\n[racefuzz: {cut} bytes cut]\n".encode() + f.read()
    return data.decode("utf-8", errors="replace")


def extract_stacks(stderr: str) -> str:
    """The crash tracer's native frames (named) and faulthandler's part of stderr (fatal
    signal or watchdog dump), or ''."""
    return native_stack.symbolize(part) if (part := ending.stack_part(stderr)) else ""


def worker_env(target: Target, trace_path: Path | None) -> dict[str, str]:
    """What the worker adds to its environment: the target's (bug switches), the sanitizer
    runtime and its options when the target's libraries were built with one, and the trace."""
    env = sanitizer.merged(target.env, target.sanitizer)
    env["PYTHONFAULTHANDLER"] = "1"
    tracer = native_stack.tracer_library()
    if tracer is not None and target.sanitizer is None:  # a sanitizer reports faults itself
        env[TRACER_ENV] = str(tracer)
    if trace_path is not None:
        env.update(dict.fromkeys(target.trace_envs(), str(trace_path)))
    return env


def start_line_server(module: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """A long-lived helper of a job slot (a zygote, a persistent worker) that takes one JSON
    request per line on stdin and answers on stdout, in its own session (a Ctrl-C reaches
    racefuzz, which then ends it), with the target's environment from its first instruction."""
    return subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
        env={**os.environ, **env},
    )


@dataclass
class Launched:
    """A started worker as the supervisor sees it, however it was started."""

    pid: int
    events: queue.Queue[dict[str, Any] | None]  # None: the event stream has ended
    wait: Callable[[float], int | None]  # its exit code within the timeout, or None


class Launcher(Protocol):
    def launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched: ...


class SpawnLauncher:
    """A fresh interpreter per schedule: portable (no fork), the reference path."""

    def launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched:
        with err_path.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "racefuzz.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, **env},
                # Its own process group: a Ctrl-C in the terminal reaches racefuzz, which
                # then kills the workers, instead of killing them mid-step (read as a crash).
                **_DETACH,
            )
        assert proc.stdin is not None and proc.stdout is not None
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, events), daemon=True).start()
        try:
            proc.stdin.write(job.encode())
            proc.stdin.close()
        except OSError:
            pass  # the worker died before reading: its exit status says why

        def wait(timeout: float) -> int | None:
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None

        return Launched(proc.pid, events, wait)


_SPAWN = SpawnLauncher()


def run(
    target: Target,
    schedule: Schedule,
    options: RunOptions | None = None,
    launcher: Launcher | None = None,
) -> RunResult:
    """Run `schedule` against `target` in a fresh worker; judged by the oracles.

    Every worker started is tracked until it ends, so `kill_all` can end a cancelled one.
    `launcher` picks how the worker starts (default: spawn; see `zygote_pool`, whose zygote a
    sanitizer target's runtime is preloaded into).
    """
    options = options or RunOptions()
    job = json.dumps(job_for(target, schedule, options))
    with tempfile.TemporaryDirectory(prefix="racefuzz-run-") as tmp:
        trace_path = Path(tmp, "trace.jsonl") if target.trace_envs() else None
        err_path = Path(tmp, "stderr.txt")
        t0 = time.monotonic()
        launched = (launcher or _SPAWN).launch(
            job, worker_env(target, trace_path), err_path, Path(tmp)
        )
        track(launched.pid, True)
        try:
            result = _supervise(launched, schedule, options, t0)
        finally:
            track(launched.pid, False)
        stderr = read_capped(err_path)
        trace: tuple[dict[str, Any], ...] = ()
        if trace_path is not None and trace_path.exists():
            trace = tuple(_read_jsonl(trace_path))
    return told(target, result, stderr, trace)


def told(
    target: Target, result: RunResult, stderr: str, trace: tuple[dict[str, Any], ...]
) -> RunResult:
    """A watched run (`ending.Watch.result`) with what its worker wrote, judged against
    `target`: repro.py's `verdict` does the same with the same modules."""
    result = ending.with_output(result, stderr, extract_stacks(stderr), trace)
    by_overlap = target.cluster_by == "overlap"
    return oracles.judge(result, target.library_of, ep_modules(target), by_overlap)


def ep_modules(target: Target) -> tuple[str, ...]:
    """The file names of the target's libraries: a sanitizer report's frames in them are the
    EP's own."""
    return tuple(lib.path.name for lib in target.libraries)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _supervise(launched: Launched, schedule: Schedule, options: RunOptions, t0: float) -> RunResult:
    """Watch the worker to its end (killing it at a limit) and tell the run (`ending.Watch`)."""
    watch = Watch(schedule, options.step_timeout, options.schedule_timeout, options.max_rss_mb, t0)
    try:
        ps: psutil.Process | None = psutil.Process(launched.pid)
    except psutil.Error:
        ps = None
    while True:
        try:
            ev = launched.events.get(timeout=0.25)
        except queue.Empty:
            ev = {}  # none for a while: time to check the limits
        if ev is None:
            break
        if ev:
            watch.event(ev, time.monotonic())
        if (not ev or ev.get("ev") == "done") and watch.limit(time.monotonic(), _rss_mb(ps)):
            kill_tree(launched.pid)
            break
    returncode = launched.wait(10)
    if returncode is None:
        kill_tree(launched.pid)
        returncode = launched.wait(10)
    if watch.internal:
        raise InternalError(f"the worker's own code failed:\n{watch.internal}")
    return watch.result(returncode, time.monotonic())


def _rss_mb(ps: psutil.Process | None) -> float | None:
    if ps is None:
        return None
    try:
        return float(ps.memory_info().rss) / 2**20
    except psutil.Error:
        return None
