"""What racefuzz costs to run: schedules per second per core, and campaign memory over time.

Throughput runs one fixed schedule (two sessions of the smallest model `tiny` on two threads, the
fixed testbed, so it runs clean) through `executor.run` back to back, first with one job, then
with one job per core (each job its own thread and launcher, as a campaign's slots), on the
spawn path (`launcher=None`: a fresh interpreter per schedule) and on the zygote path
(`ZygoteLauncher`: a fork of a pre-initialised process), and through a persistent worker
(`PersistentLauncher`: one process serves schedule after schedule, TSan's path). Beside them,
the floor that spawning cannot beat: starting a bare interpreter that imports onnxruntime, in a
loop. CPU time is read
from `getrusage` and psutil (this process, every reaped descendant and the live zygotes), for
"per CPU-second"; "per core" is the all-cores wall rate divided by the cores. Both move with the
load of a shared machine (spinning ORT thread pools burn more under contention): quote the date.

Memory: a real `racefuzz run` (portfolio, shrinking on, every core) as a subprocess, its RSS
sampled every second with psutil: start, median, max, end and the least-squares slope.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from bench import stats
from racefuzz.execute import executor
from racefuzz.execute.persistent_pool import PersistentLauncher
from racefuzz.execute.zygote_pool import ZygoteLauncher
from racefuzz.execute.zygote_pool import available as zygote_available
from racefuzz.judge.outcome import Exit
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target

REPO = Path(__file__).resolve().parent.parent
SCHEDULE = Schedule(
    threads=2,
    steps=(
        Step(thread=0, op=Op.REGISTER),
        Step(thread=0, op=Op.CREATE, session="s1", profile="dml", model="tiny"),
        Step(thread=1, op=Op.CREATE, session="s2", profile="mgx", model="tiny"),
        Step(thread=1, op=Op.RUN, session="s1"),
        Step(thread=0, op=Op.RUN, session="s2"),
        Step(thread=0, op=Op.RUN, session="s1"),
    ),
)


def _cpu_seconds() -> float:
    """CPU time of this process, its reaped descendants, and its live children with theirs.

    Live children matter for the zygote path: a zygote reaps its forks (so their time lands in
    the zygote's children times) but is itself reaped only when it is closed."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    for child in psutil.Process().children():
        try:
            t = child.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0)
        total += getattr(t, "children_system", 0.0)
    return total


@dataclass
class Rate:
    """Repeated rounds of one configuration; figures are medians over rounds (noisy machine)."""

    label: str
    jobs: int
    rounds: list[tuple[int, float, float]] = field(default_factory=list)  # (runs, wall, CPU s)
    latency_ms: list[float] = field(default_factory=list)  # wall per call, as the caller sees it
    steps_ms: list[float] = field(default_factory=list)  # of which inside the schedule's steps
    unclean: int = 0  # runs that did not end clean (should be 0: the schedule is clean)

    @property
    def count(self) -> int:
        return sum(n for n, _, _ in self.rounds)

    @property
    def per_s(self) -> float:
        return stats.median([n / wall for n, wall, _ in self.rounds])

    @property
    def per_cpu_s(self) -> float:
        return stats.median([n / cpu for n, _, cpu in self.rounds if cpu > 0] or [0.0])


Work = Callable[[], tuple[bool, float]]  # one call: (ended clean, ms spent in schedule steps)


def _round(rate: Rate, work: Work, seconds: float) -> None:
    """Call `work` back to back on `rate.jobs` threads for `seconds`; add one round to `rate`."""
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    count = [0]

    def body() -> None:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            ok, steps_ms = work()
            with lock:
                rate.latency_ms.append((time.monotonic() - t0) * 1000)
                rate.steps_ms.append(steps_ms)
                rate.unclean += not ok
                count[0] += 1

    cpu0, t0 = _cpu_seconds(), time.monotonic()
    threads = [threading.Thread(target=body) for _ in range(rate.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rate.rounds.append((count[0], time.monotonic() - t0, _cpu_seconds() - cpu0))


def _schedule(
    target: Target, launcher: executor.Launcher | None, schedule: Schedule = SCHEDULE
) -> tuple[bool, float]:
    r = executor.run(target, schedule, launcher=launcher)
    return r.exit is Exit.CLEAN, sum(o.ms for o in r.outcomes)


def _import_onnxruntime() -> tuple[bool, float]:
    cmd = [sys.executable, "-c", "import onnxruntime"]
    return subprocess.run(cmd, capture_output=True).returncode == 0, 0.0


FLOOR = "floor: `python -c 'import onnxruntime'`"
SPAWN = "spawn (fresh interpreter per schedule)"
ZYGOTE = "zygote (fork of a pre-initialised process)"
ZYGOTE_EMPTY = "zygote, a `register`-only schedule (the fixed cost of any run)"
PERSISTENT = "persistent worker (one process serves schedules; TSan's path)"
PERSISTENT_EMPTY = "persistent worker, a `register`-only schedule"
REGISTER_ONLY = Schedule(threads=1, steps=(Step(thread=0, op=Op.REGISTER),))


class _Zygotes:
    """One warm launcher per job thread (a zygote, or a persistent worker), handed out to
    threads as they first ask."""

    def __init__(self, target: Target, jobs: int, persistent: bool = False) -> None:
        self.target = target
        self.zygotes: list[ZygoteLauncher | PersistentLauncher] = [
            PersistentLauncher(target.trace_envs()) if persistent else ZygoteLauncher()
            for _ in range(jobs)
        ]
        # A launcher's start-up is a campaign's one-off cost, not part of the rate: warm them.
        for z in self.zygotes:
            executor.run(target, SCHEDULE, launcher=z)
        self.mine: dict[int, ZygoteLauncher | PersistentLauncher] = {}
        self.lock = threading.Lock()

    def work(self, schedule: Schedule = SCHEDULE) -> tuple[bool, float]:
        with self.lock:
            me = threading.get_ident()
            if me not in self.mine:
                self.mine[me] = self.zygotes[len(self.mine)]
        return _schedule(self.target, self.mine[me], schedule)

    def work_empty(self) -> tuple[bool, float]:
        return self.work(REGISTER_ONLY)

    def close(self) -> None:
        for z in self.zygotes:
            z.close()


def measure(seconds: float, rounds: int, cores: int) -> list[Rate]:
    """Each configuration `rounds` times, interleaved, `seconds / rounds` each."""
    target = load_target("testbed")
    rates: list[Rate] = []
    for jobs in sorted({1, cores}):
        configs: list[tuple[Rate, Work]] = [
            (Rate(FLOOR, jobs), _import_onnxruntime),
            (Rate(SPAWN, jobs), lambda: _schedule(target, None)),
        ]
        pools = (
            [
                (_Zygotes(target, jobs), ZYGOTE, ZYGOTE_EMPTY),
                (_Zygotes(target, jobs, persistent=True), PERSISTENT, PERSISTENT_EMPTY),
            ]
            if zygote_available()
            else []
        )
        for pool, label, empty in pools:
            configs.append((Rate(label, jobs), pool.work))
            if jobs == 1:
                configs.append((Rate(empty, jobs), pool.work_empty))
        try:
            for _ in range(rounds):
                for rate, work in configs:
                    for pool, _, _ in pools:
                        pool.mine.clear()  # each round has new threads
                    _round(rate, work, seconds / rounds)
        finally:
            for pool, _, _ in pools:
                pool.close()
        rates += [rate for rate, _ in configs]
    return rates


def rate_table(rates: list[Rate], cores: int) -> str:
    """`of the limit`: runs/s per core against 1000 / (the schedule's own ms in steps), the rate
    a worker that cost nothing beyond its steps would reach on one core."""
    lines = [
        "| path | jobs | runs | runs/s | runs/s per core | runs per CPU-second | "
        "median ms per run | of which in steps | of the limit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rates:
        per_core = r.per_s / min(r.jobs, cores)
        bad = f" ({r.unclean} not clean)" if r.unclean else ""
        step_ms = stats.median(r.steps_ms) if r.label != FLOOR and r.steps_ms else 0.0
        in_steps = "-" if r.label == FLOOR else f"{step_ms:.0f}"
        share = f"{per_core * step_ms / 1000:.0%}" if step_ms > 0 else "-"
        lines.append(
            f"| {r.label} | {r.jobs} | {r.count}{bad} | {r.per_s:.1f} | {per_core:.1f} | "
            f"{r.per_cpu_s:.1f} | {stats.median(r.latency_ms):.0f} | {in_steps} | {share} |"
        )
    return "\n".join(lines)


# --- memory over time ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    seconds: float
    samples: list[tuple[float, float]]  # (s since the campaign began, RSS MB of its process)
    summary_line: str  # the campaign's own last line (schedules, findings)

    def slope_mb_per_min(self, since: float = 0.0) -> float:
        """Least-squares slope of RSS over the samples taken at or after `since` seconds."""
        points = [(t, m) for t, m in self.samples if t >= since]
        if len(points) < 2:
            return 0.0
        mx = sum(t for t, _ in points) / len(points)
        my = sum(m for _, m in points) / len(points)
        sxx = sum((t - mx) ** 2 for t, _ in points)
        sxy = sum((t - mx) * (m - my) for t, m in points)
        return 60 * sxy / sxx if sxx else 0.0


def campaign_memory(seconds: float) -> Memory:
    """Sample a `racefuzz run` subprocess from its first line (interpreter start-up excluded)."""
    with tempfile.TemporaryDirectory(prefix="racefuzz-bench-") as out:
        cmd = [sys.executable, "-m", "racefuzz", "run", "--target", "testbed"]
        cmd += ["--seconds", str(seconds), "--no-dashboard", "--out", out]
        proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        lines: list[str] = []
        began = threading.Event()

        def read(stream: IO[str]) -> None:
            for line in stream:
                lines.append(line.rstrip())
                began.set()

        reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
        reader.start()
        began.wait(timeout=120)
        ps = psutil.Process(proc.pid)
        samples: list[tuple[float, float]] = []
        t0 = time.monotonic()
        while proc.poll() is None:
            try:
                rss = ps.memory_info().rss / 2**20
            except psutil.Error:
                break
            if rss > 0:  # an exited, unreaped campaign reads 0: not a sample of it
                samples.append((time.monotonic() - t0, rss))
            time.sleep(1.0)
        proc.wait()
        reader.join(timeout=10)
    last = next((line for line in reversed(lines) if "schedules in" in line), "")
    return Memory(seconds, samples, last)


def memory_table(m: Memory) -> str:
    rss = [r for _, r in m.samples]
    if not rss:
        return "No samples: the campaign ended before the first one."
    half = m.seconds / 2
    return "\n".join(
        [
            "| campaign s | samples | start MB | median MB | max MB | end MB | slope MB/min "
            "(all) | slope MB/min (second half) |",
            "|---|---|---|---|---|---|---|---|",
            f"| {m.seconds:g} | {len(rss)} | {rss[0]:.0f} | {stats.median(rss):.0f} | "
            f"{max(rss):.0f} | {rss[-1]:.0f} | {m.slope_mb_per_min():+.2f} | "
            f"{m.slope_mb_per_min(since=half):+.2f} |",
            "",
            f"The campaign said: `{m.summary_line.split('; summary:')[0]}`",
        ]
    )


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
