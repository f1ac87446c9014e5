"""Time to bug: how long racefuzz's strategies and the stress baseline take to detect each
seeded testbed bug, over repeated trials (FuzzBench/Magma style).

A trial is one `Campaign` (one job, seed = trial number, no corpus, no shrinking, no baselines)
whose `stop_when` fires on the first finding that is *this* bug (`Bug.matches`), or one
`bench.stress` run with the same predicate; both are capped, and a trial that did not detect the
bug counts as the cap (censored). The clock starts before the campaign (or the stress process) is
built, so start-up (zygote, interpreter, ORT import, registration) is included for both.

What counts as each bug was checked against replays of the seed corpus and against the fixed
testbed: the fixed design (target `testbed`) has residual R1, whose signatures are env-level
reads, copies and IOBinding runs failing with a backend error. So B1/B3/B4/B8 count only on a
plain `run`, which the fixed testbed never fails; `specificity()` measures that on the fixed
testbed for every predicate and the table reports it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from bench import stats
from bench.stress import run_stress
from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.loop import Campaign
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Schedule
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target

STRATEGIES: tuple[str, ...] = ("random", "pct", "swarm", "portfolio")
STRESS = "stress"
STRESS_THREADS = 4
_BACKEND_FAILURE = ("HIP failure", "invalid allocation handle")
_NO_TRANSFER = "Data transfer implementation between source and destination device was not found"


def _backend_error(f: Finding) -> bool:
    return f.kind == "error" and any(m in f.raw or m in f.message for m in _BACKEND_FAILURE)


@dataclass(frozen=True)
class Bug:
    name: str  # B1..B8, R1
    spec: str  # the target with this bug (and only this one) switched on
    counts: str  # what a detection is, in words, for the table
    matches: Callable[[Finding], bool]


RUN_OPS = ("run", "run_bound", "run_async", "feed")
BUGS: tuple[Bug, ...] = (
    Bug(
        "B1",
        "testbed:B1",
        "`error` on `run` with a HIP/DML backend failure",
        lambda f: f.op == "run" and _backend_error(f),
    ),
    Bug(
        "B2",
        "testbed:B2",
        "`error` on any op: 'Data transfer implementation ... not found'",
        lambda f: f.kind == "error" and _NO_TRANSFER in f.raw,
    ),
    Bug(
        "B3",
        "testbed:B3",
        "`error` on `run` with a HIP/DML backend failure",
        lambda f: f.op == "run" and _backend_error(f),
    ),
    Bug(
        "B4",
        "testbed:B4",
        "`error` on `run` with a HIP/DML backend failure",
        lambda f: f.op == "run" and _backend_error(f),
    ),
    Bug(
        "B5",
        "testbed:B5",
        "`zeroed` or `mismatch` on `run`/`run_bound`",
        lambda f: f.kind in ("zeroed", "mismatch") and f.op in ("run", "run_bound"),
    ),
    Bug(
        "B6",
        "testbed:B6",
        "`error` on a run (`run`, `run_bound`, `run_async`, `feed`) of an `mgx` session, "
        "naming its missing allocator",
        # Any run op: the first of them to fail opens the cluster, the others join it. R1's
        # backend failures on mgx runs are not B6's.
        lambda f: (
            f.kind == "error"
            and f.op in RUN_OPS
            and "mgx" in f.profiles
            and "alloc" in f.message
            and not any(s in f.message for s in _BACKEND_FAILURE)
        ),
    ),
    Bug(
        "B7",
        "testbed:B7",
        "`zeroed` or `mismatch` on `run`/`run_bound`",
        lambda f: f.kind in ("zeroed", "mismatch") and f.op in ("run", "run_bound"),
    ),
    Bug(
        "B8",
        "testbed:B8",
        "`error`, `zeroed` or `mismatch` on `run`",
        lambda f: f.op == "run" and f.kind in ("error", "zeroed", "mismatch"),
    ),
    Bug(
        "R1",
        "testbed",
        "`error` with a HIP/DML backend failure on `read`/`copy`/`alloc`, or `corrupt-copy`",
        lambda f: (
            (f.op in ("read", "copy", "alloc") and _backend_error(f)) or f.kind == "corrupt-copy"
        ),
    ),
)


def bug(name: str) -> Bug:
    return next(b for b in BUGS if b.name == name)


@dataclass(frozen=True)
class Trial:
    bug: str
    arm: str  # a strategy name or "stress"
    seed: int
    seconds: float  # time to detection, or the cap when not detected
    found: bool
    work: int  # schedules run (campaign) or calls made (stress, by children that ended)
    finding: Finding | None = None
    schedule: Schedule | None = None  # the first failing schedule (campaigns only)


_targets: dict[str, Target] = {}


def target(spec: str) -> Target:
    if spec not in _targets:
        _targets[spec] = load_target(spec)
    return _targets[spec]


def campaign_trial(b: Bug, strategy: str, seed: int, cap: float) -> Trial:
    hit: list[tuple[float, Finding]] = []
    t0 = time.monotonic()

    def stop(f: Finding) -> bool:
        if not hit and b.matches(f):
            hit.append((time.monotonic() - t0, f))
        return bool(hit)

    with tempfile.TemporaryDirectory(prefix="racefuzz-bench-") as tmp:
        config = CampaignConfig(seconds=cap, jobs=1, seed=seed, strategy=strategy, shrink=False)
        campaign = Campaign(target(b.spec), config, Path(tmp), stop_when=stop)
        state = trio.run(campaign.run)
        if not hit:
            return Trial(b.name, strategy, seed, cap, False, state.schedules)
        seconds, f = hit[0]
        schedule = load(state.findings[f.cluster].original)
    return Trial(b.name, strategy, seed, min(seconds, cap), True, state.schedules, f, schedule)


def stress_trial(b: Bug, seed: int, cap: float) -> Trial:
    r = run_stress(target(b.spec), seconds=cap, seed=seed, threads=STRESS_THREADS, stop=b.matches)
    found = r.found_s is not None
    seconds = min(r.found_s, cap) if r.found_s is not None else cap
    f = r.seen[-1].finding if found else None
    return Trial(b.name, STRESS, seed, seconds, found, r.ops, f)


def run_trials(
    bugs: Sequence[Bug],
    trials: int,
    cap: float,
    arms: Sequence[str] = (*STRATEGIES, STRESS),
    progress: Callable[[Trial], None] | None = None,
) -> list[Trial]:
    out: list[Trial] = []
    for b in bugs:
        for seed in range(1, trials + 1):
            for arm in arms:  # interleaved by seed: machine noise spreads over every arm
                t = (
                    stress_trial(b, seed, cap)
                    if arm == STRESS
                    else campaign_trial(b, arm, seed, cap)
                )
                out.append(t)
                if progress is not None:
                    progress(t)
    return out


@dataclass(frozen=True)
class Specificity:
    seconds: float
    schedules: int
    stress_calls: int
    hits: dict[str, list[str]]  # bug -> signatures on the fixed testbed its predicate accepted


def specificity(seconds: float, seed: int = 1) -> Specificity:
    """Run the fixed testbed (portfolio campaign, then stress) and see which B-predicates fire."""
    seen: list[Finding] = []
    with tempfile.TemporaryDirectory(prefix="racefuzz-bench-") as tmp:
        config = CampaignConfig(seconds=seconds, jobs=1, seed=seed, shrink=False)
        state = trio.run(Campaign(target("testbed"), config, Path(tmp)).run)
        seen += [rec.finding for rec in state.findings.values()]
    r = run_stress(target("testbed"), seconds=seconds, seed=seed, threads=STRESS_THREADS)
    seen += [s.finding for s in r.seen]
    hits = {
        b.name: sorted({f.signature for f in seen if b.matches(f)})
        for b in BUGS
        if b.spec != "testbed"
    }
    return Specificity(seconds, state.schedules, r.ops, hits)


# --- the table -------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def table(trials: Sequence[Trial], cap: float, spec: Specificity | None) -> str:
    lines = [
        "| bug | what counts | arm | found | median s | IQR s | speed-up vs stress | "
        "p (MWU vs stress) | A12 (faster than stress) | median work |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts: list[str] = []
    arms = list(dict.fromkeys(t.arm for t in trials))
    for b in BUGS:
        by_arm = {a: [t for t in trials if t.bug == b.name and t.arm == a] for a in arms}
        if not any(by_arm.values()):
            continue
        stress = [t.seconds for t in by_arm.get(STRESS, [])]
        for arm, ts in by_arm.items():
            if not ts:
                continue
            times = [t.seconds for t in ts]
            found = sum(t.found for t in ts)
            med = stats.median(times)
            q1, q3 = stats.iqr(times)
            med_s = ("> " if med >= cap else "") + _fmt(med)
            p = a = speed = "-"
            if arm != STRESS and stress:
                mw = stats.mann_whitney_u(times, stress)
                p = f"{mw.p:.3g}"
                a = f"{stats.a12(stress, times):.2f}"
                speed = f"{stats.median(stress) / max(med, 1e-9):.1f}x"
            work = stats.median([float(t.work) for t in ts])
            unit = "calls" if arm == STRESS else "schedules"
            first = arm == next(a for a, v in by_arm.items() if v)
            name, counts = (b.name, b.counts) if first else ("", "")
            lines.append(
                f"| {name} | {counts} | {arm} | {found}/{len(ts)} | {med_s} | "
                f"{_fmt(q1)}-{_fmt(q3)} | {speed} | {p} | {a} | {work:.0f} {unit} |"
            )
            if arm == "portfolio":
                verdicts.append(_verdict(b.name, ts, stress, cap))
    out = "\n".join(lines)
    out += "\n\n### Against the targets\n\n" + "\n".join(f"- {v}" for v in verdicts)
    if spec is not None:
        out += "\n\n" + _specificity_text(spec)
    out += "\n\n" + _raw(trials)
    return out


def _verdict(name: str, ts: Sequence[Trial], stress: Sequence[float], cap: float) -> str:
    times = [t.seconds for t in ts]
    med = stats.median(times)
    every = all(t.found for t in ts)
    first = (
        f"found in every trial with median {_fmt(med)} s: "
        + ("**met**" if every and med < 5 else "**missed**")
        if every
        else f"found in {sum(t.found for t in ts)}/{len(ts)} trials (cap {cap:g} s): **missed**"
    )
    if not stress:
        return f"{name} portfolio: {first}"
    ratio = stats.median(stress) / max(med, 1e-9)
    a = stats.a12(stress, times)
    fast = "**met**" if ratio >= 10 and a >= 0.9 else "**missed**"
    return (
        f"{name} portfolio: {first}; {ratio:.1f}x stress's median with A12 {a:.2f} "
        f"(target >= 10x and A12 >= 0.9): {fast}"
    )


def _specificity_text(spec: Specificity) -> str:
    fired = {k: v for k, v in spec.hits.items() if v}
    head = (
        f"### Specificity\n\nEach bug's predicate applied to everything the fixed testbed "
        f"(target `testbed`, residual R1 only) showed in {spec.seconds:g} s of a portfolio "
        f"campaign ({spec.schedules} schedules) and {spec.seconds:g} s of stress "
        f"({spec.stress_calls} calls): "
    )
    if not fired:
        return head + "no B-predicate fired, so a detection above is the switched-on bug."
    rows = "\n".join(f"- {k}: {', '.join(v)}" for k, v in fired.items())
    return head + "these predicates fired (false detections):\n" + rows


def _raw(trials: Sequence[Trial]) -> str:
    rows = [
        f"{t.bug} {t.arm} seed {t.seed}: {t.seconds:.2f} s"
        + ("" if t.found else " (censored)")
        + (f" [{t.finding.kind} on {t.finding.op}: {t.finding.message[:60]}]" if t.finding else "")
        for t in trials
    ]
    return (
        "<details><summary>Every trial</summary>\n\n```\n" + "\n".join(rows) + "\n```\n</details>"
    )
