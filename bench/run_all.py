"""The benchmark entry: `python -m bench.run_all [--quick] [--only NAME ...]`.

Runs throughput and memory (`bench.throughput`), time to bug (`bench.time_to_bug`, with the
stress baseline of `bench.stress`) and shrink quality (`bench.shrink_quality`), and writes one
Markdown file each under `bench/results/` (`NAME.md` in full mode, `NAME-quick.md` with
`--quick`), each headed by the date, the machine and the command that regenerates it. Quick mode
fits in under 10 minutes on 2 cores; full mode takes about half an hour.

The modules measure and render tables; only this one writes files and knows the modes.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnxruntime

from bench import shrink_quality, throughput, time_to_bug
from bench.time_to_bug import BUGS, Trial
from racefuzz.report import envinfo

RESULTS = Path(__file__).resolve().parent / "results"
NAMES = ("throughput", "time_to_bug", "shrink_quality")


@dataclass(frozen=True)
class Mode:
    quick: bool
    rate_seconds: float  # per throughput configuration, split into `rate_rounds` rounds
    rate_rounds: int
    memory_seconds: float
    trials: int
    cap: float
    specificity_seconds: float
    shrink_budget: float
    known_replays: int


QUICK = Mode(True, 6, 3, 30, 3, 20, 15, 30, 10)
FULL = Mode(False, 30, 5, 300, 10, 60, 60, 120, 20)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def machine() -> str:
    cpu = envinfo.cpu_model() or platform.machine()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"{cpu}, {throughput.cores()} cores usable ({os.cpu_count()} logical); "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
        f"onnxruntime {onnxruntime.__version__}; load average at start {load}"
    )


def revision() -> str:
    def git(*args: str) -> str:
        cmd = ["git", "-C", str(RESULTS.parent.parent), *args]
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    # Only code that can change a figure counts; the results being written here do not.
    dirty = git("status", "--porcelain", "--", "racefuzz", "testbed", "bench/*.py")
    return head + (" (with uncommitted changes to racefuzz/testbed/bench code)" if dirty else "")


def write(
    name: str, title: str, body: str, mode: Mode, command: str, seconds: float, rev: str
) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / (f"{name}-quick.md" if mode.quick else f"{name}.md")
    header = (
        f"# {title}\n\n"
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
        f"- machine: {machine()}\n"
        f"- racefuzz: {rev}\n"
        f"- regenerate: `{command}` ({'quick' if mode.quick else 'full'} mode, "
        f"took {seconds:.0f} s)\n\n"
    )
    path.write_text(header + body.rstrip() + "\n", encoding="utf-8")
    log(f"wrote {path}")
    return path


def throughput_body(mode: Mode) -> str:
    cores = throughput.cores()
    log(f"throughput: {mode.rate_seconds:g} s per configuration")
    rates = throughput.measure(mode.rate_seconds, mode.rate_rounds, cores)
    log(f"memory: a {mode.memory_seconds:g} s campaign")
    memory = throughput.campaign_memory(mode.memory_seconds)
    zygote = [r for r in rates if r.label == throughput.ZYGOTE]
    per_core = max((r.per_s / min(r.jobs, cores) for r in zygote), default=0.0)
    verdict = "**met**" if per_core >= 30 else "**missed**"
    return (
        "## Schedules per second\n\n"
        f"The schedule: `{shrink_quality.canonical(throughput.SCHEDULE)}` (model `tiny`, target "
        f"`testbed`), run back to back for {mode.rate_seconds:g} s per configuration in "
        f"{mode.rate_rounds} interleaved rounds; rates are medians over rounds.\n\n"
        + throughput.rate_table(rates, cores)
        + f"\n\nTarget: at least 30 schedules/s per core on the zygote path: best measured "
        f"{per_core:.1f}: {verdict}.\n\n"
        "## Campaign memory over time\n\n"
        "`racefuzz run --target testbed --no-dashboard` (portfolio, every core, corpus, "
        "baselines and shrinking on), RSS of the campaign process sampled every second from its "
        "first line on.\n\n" + throughput.memory_table(memory)
    )


def time_to_bug_body(mode: Mode) -> tuple[str, list[Trial]]:
    log(f"time to bug: {mode.trials} trials per bug and arm, cap {mode.cap:g} s")

    def progress(t: Trial) -> None:
        what = f"{t.seconds:.2f} s" if t.found else "not found"
        log(f"  {t.bug} {t.arm:<9} seed {t.seed}: {what}")

    trials = time_to_bug.run_trials(BUGS, mode.trials, mode.cap, progress=progress)
    log(f"specificity: {mode.specificity_seconds:g} s on the fixed testbed")
    spec = time_to_bug.specificity(mode.specificity_seconds)
    body = (
        f"{mode.trials} trials per bug and arm, seeds 1..{mode.trials}, cap {mode.cap:g} s "
        "(a trial that did not detect the bug counts as the cap). Campaigns: one job, no corpus, "
        f"no shrinking, no baselines. Stress: {time_to_bug.STRESS_THREADS} threads in one "
        "process (`bench/stress.py`). Times include start-up. p: two-sided Mann-Whitney U "
        "against stress; A12: probability that the arm detects the bug sooner than stress "
        "(0.5 = no difference). Work: schedules run, or stress calls made, until detection.\n\n"
    )
    return body + time_to_bug.table(trials, mode.cap, spec) + deep_section(), trials


def deep_section() -> str:
    """The seeded bugs above are found in a schedule or two; the deep ones, which random timing
    seldom hits, are measured by `bench.deep_bugs`: its latest results, as they were written."""
    deep = RESULTS / "deep_bugs.md"
    if not deep.exists():
        return "\n\n## Deep switches\n\nNot measured yet: `python -m bench.deep_bugs`.\n"
    _, _, rest = deep.read_text(encoding="utf-8").partition("\n")
    return (
        "\n\n## Deep switches\n\nThe bugs above are found in the first schedule or two by every "
        "arm, so they cannot tell a better strategy from a worse one. A deep switch is one random "
        "timing seldom hits (`python -m bench.deep_bugs`, copied here from "
        "`bench/results/deep_bugs.md`):\n" + rest.replace("\n# ", "\n### ")
    )


def shrink_body(mode: Mode, trials: Sequence[Trial] | None) -> str:
    results = []
    for b in BUGS:
        found = sorted(
            (t for t in trials or () if t.bug == b.name and t.arm == "portfolio" and t.schedule),
            key=lambda t: t.seed,
        )
        if found and found[0].finding is not None and found[0].schedule is not None:
            finding, schedule = found[0].finding, found[0].schedule
        else:
            log(f"shrink: a campaign for {b.name}'s first failing schedule")
            first = shrink_quality.first_failing(b, mode.cap)
            if first is None:
                continue
            finding, schedule = first
        log(f"shrink: {b.name}, {len(schedule.steps)} steps, budget {mode.shrink_budget:g} s")
        results.append(shrink_quality.shrink_one(b, finding, schedule, mode.shrink_budget))
    log(f"shrink: replaying the known minimal schedules {mode.known_replays} times")
    known = shrink_quality.validate_known(mode.known_replays)
    return (
        "Each bug's first failing schedule from the portfolio's lowest-seed time-to-bug trial, "
        "shrunk with `shrink_command.shrink_to_bundle` (what campaigns use: replays=3, need=1, "
        f"recheck 1 of 3, 20 final replays) on the zygote path, budget {mode.shrink_budget:g} s. "
        "'known minimal reached' compares with the schedules listed below, up to renaming of "
        "threads, sessions, values and groups.\n\n"
        + shrink_quality.table(results, known, mode.known_replays)
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer trials and shorter caps (< 10 min)")
    p.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES))
    args = p.parse_args(argv)
    mode = QUICK if args.quick else FULL
    command = "python -m bench.run_all" + (" --quick" if args.quick else "")
    if sorted(args.only) != sorted(NAMES):
        command += " --only " + " ".join(args.only)
    t_all = time.monotonic()
    # Read before anything runs: what this process imported is what was measured, even if the
    # checkout moves on while it runs.
    rev = revision()
    if "throughput" in args.only:
        t0 = time.monotonic()
        body = throughput_body(mode)
        took = time.monotonic() - t0
        write("throughput", "Throughput and memory", body, mode, command, took, rev)
    trials = None
    if "time_to_bug" in args.only:
        t0 = time.monotonic()
        body, trials = time_to_bug_body(mode)
        write("time_to_bug", "Time to bug", body, mode, command, time.monotonic() - t0, rev)
    if "shrink_quality" in args.only:
        t0 = time.monotonic()
        body = shrink_body(mode, trials)
        took = time.monotonic() - t0
        write("shrink_quality", "Shrink quality", body, mode, command, took, rev)
    log(f"done in {time.monotonic() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
