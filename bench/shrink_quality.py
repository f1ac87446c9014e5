"""Shrink quality: from the first failing schedule a campaign found to a minimal one, per bug.

For each seeded bug, the first failing schedule of a time-to-bug campaign (or, run alone, of a
fresh portfolio campaign) is shrunk exactly as a campaign shrinks a new signature
(`shrink_command.shrink_to_bundle`: the shrinker, the final reproduction replays and the report
bundle), on the zygote path. The table says what it cost and whether the known minimal schedule
was reached, up to renaming of threads, sessions, values and groups (`canonical`).

The known minimal schedules follow from each bug's description (DESIGN.md, testbed/README.md),
written in a compact form (`parse`); `P` is the profile of the failing session and `Q` the other
one. `validate_known` replays each of them on its bug's target and on the fixed testbed, so the
table shows that each fails with its bug and passes without it (R1 and the bugs that fail alone,
B2 and B6, excepted by design).
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from bench.time_to_bug import BUGS, Bug, target
from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.loop import Campaign
from racefuzz.cli.shrink_command import shrink_to_bundle
from racefuzz.execute import executor
from racefuzz.execute.runner import Runner
from racefuzz.execute.zygote_pool import ZygoteLauncher
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule, Step

PROFILES = ("dml", "mgx")
MAX_THREADS = 3
# Known minimal schedules, steps separated by ';', each `T<thread> <op> [name] [profile] [g<n>]`.
# `P` is the profile of the finding, `Q` the other one, `{op}` the finding's op. Threads: `T*` is
# any thread; `Ta`, `Tb`, ... are threads that differ from each other (same letter, same thread).
# Every assignment of threads that fits is accepted: the order of calls is what matters.
KNOWN: dict[str, tuple[str, ...]] = {
    # The DataTransfer latches the backend in the slot at its first use, here Q's, for good.
    "B1": ("T* register; T* create s1 P; T* create s2 Q; T* run s1",),
    # The registration-time DataTransfer froze null: any env-level copy after a session.
    "B2": (
        "T* register; T* create s1 P; T* copy P",
        "T* register; T* create s1 Q; T* copy P",
        "T* register; T* create s1 P; T* alloc v1 P",
        "T* register; T* create s1 Q; T* alloc v1 P",
        "T* register; T* create s1 P; T* run_bound s1",
    ),
    # Two sessions of different backends alive; the one created first runs on the other's.
    "B3": ("T* register; T* create s1 P; T* create s2 Q; T* run s1",),
    "B4": ("T* register; T* create s1 P; T* create s2 Q; T* run s1",),
    # Run on a thread other than the creating one.
    "B5": ("T* register; Ta create s1 P; Tb {op} s1",),
    # The mgx backend has no allocator hook: its first run fails, alone.
    "B6": ("T* register; T* create s1 P; T* run s1",),
    "B7": ("T* register; Ta create s1 P; Tb {op} s1",),
    # Two creates overlapping (either listed first), then a run of the failing session.
    "B8": (
        "T* register; Ta create s1 P g1; Tb create s2 Q g1; T* run s1",
        "T* register; Ta create s2 Q g1; Tb create s1 P g1; T* run s1",
    ),
    # A value allocated while the slot said one backend, read back after the other's create.
    "R1": (
        "T* register; T* create s1 P; T* alloc v1 P; T* create s2 Q; T* read v1",
        "T* register; T* create s1 Q; T* alloc v1 P; T* create s2 P; T* read v1",
    ),
}


def expand_threads(text: str) -> list[str]:
    """Every concrete form of `text`: `T*` on any thread, letters on distinct threads."""
    parts = [part.strip().split(" ", 1) for part in text.split(";")]
    out = []
    for threads in itertools.product(range(MAX_THREADS), repeat=len(parts)):
        bound: dict[str, int] = {}
        fits = True
        for (tag, _), t in zip(parts, threads, strict=True):
            letter = tag[1:]
            if letter.isdigit():
                fits &= int(letter) == t
            elif letter != "*":
                fits &= bound.setdefault(letter, t) == t
        fits &= len(set(bound.values())) == len(bound)
        if fits:
            out.append(
                "; ".join(f"T{t} {rest}" for (_, rest), t in zip(parts, threads, strict=True))
            )
    return out


def parse(text: str, model: str = "tiny") -> Schedule:
    """A schedule from the compact form above (names and profiles already filled in)."""
    steps: list[Step] = []
    for part in text.split(";"):
        words = part.split()
        thread, op = int(words[0][1:]), Op(words[1])
        group = next((int(w[1:]) for w in words[2:] if w.startswith("g")), None)
        names = [w for w in words[2:] if not w.startswith("g")]
        step = Step(thread=thread, op=op, group=group)
        if op in (Op.CREATE, Op.RUN, Op.RUN_BOUND, Op.RELEASE):
            step = Step(thread=thread, op=op, group=group, session=names[0])
        if op in (Op.ALLOC, Op.READ, Op.FREE):
            step = Step(thread=thread, op=op, group=group, value=names[0])
        profile = names[1] if op in (Op.CREATE, Op.ALLOC) else names[0] if op is Op.COPY else None
        if profile is not None:
            step = Step(
                thread=thread,
                op=op,
                group=group,
                session=step.session,
                value=step.value,
                profile=profile,
                model=model if op is Op.CREATE else None,
            )
        steps.append(step)
    return Schedule(threads=1 + max(s.thread for s in steps), steps=tuple(steps))


def canonical(schedule: Schedule) -> str:
    """The compact form with threads, sessions, values and groups renamed by first use."""
    names: dict[tuple[str, object], str] = {}

    def rename(kind: str, key: object, prefix: str, start: int) -> str:
        count = sum(1 for k in names if k[0] == kind)
        return names.setdefault((kind, key), f"{prefix}{start + count}")

    parts = []
    for s in schedule.steps:
        words = [rename("thread", s.thread, "T", 0), str(s.op)]
        if s.session is not None:
            words.append(rename("session", s.session, "s", 1))
        if s.value is not None:
            words.append(rename("value", s.value, "v", 1))
        if s.profile is not None:
            words.append(s.profile)
        if s.group is not None:
            words.append(rename("group", s.group, "g", 1))
        parts.append(" ".join(words))
    return "; ".join(parts)


def known_forms(bug: str, finding: Finding) -> list[str]:
    """The known minimal schedules of `bug` for this finding, in canonical form."""
    failing = finding.profiles[0] if finding.profiles else "dml"
    p, q = failing, next(x for x in PROFILES if x != failing)
    out: list[str] = []
    for text in KNOWN[bug]:
        filled = text.replace("{op}", finding.op).replace(" P", f" {p}").replace(" Q", f" {q}")
        for form in expand_threads(filled):
            c = canonical(parse(form))
            if c not in out:
                out.append(c)
    return out


@dataclass(frozen=True)
class Shrunk:
    bug: str
    finding: Finding
    before: Schedule
    after: Schedule
    seconds: float
    runs: int
    reproduction: tuple[int, int]
    one_minimal: bool
    stopped: str
    known: bool  # the result is one of the known minimal schedules


def first_failing(b: Bug, seconds: float, seed: int = 1) -> tuple[Finding, Schedule] | None:
    """The first schedule of a portfolio campaign that shows `b`, with its finding."""
    hit: list[Finding] = []

    def stop(f: Finding) -> bool:
        if not hit and b.matches(f):
            hit.append(f)
        return bool(hit)

    with tempfile.TemporaryDirectory(prefix="racefuzz-bench-") as tmp:
        config = CampaignConfig(seconds=seconds, jobs=1, seed=seed, shrink=False)
        campaign = Campaign(target(b.spec), config, Path(tmp), stop_when=stop)
        state = trio.run(campaign.run)
        if not hit:
            return None
        return hit[0], load(state.findings[hit[0].cluster].original)


def shrink_one(b: Bug, finding: Finding, schedule: Schedule, budget_s: float) -> Shrunk:
    runner = Runner(target(b.spec))
    launcher = ZygoteLauncher()
    try:
        failing = runner.run(schedule, launcher)
        with tempfile.TemporaryDirectory(prefix="racefuzz-bench-") as tmp:
            t0 = time.monotonic()
            result, _ = shrink_to_bundle(
                runner,
                b.spec,
                schedule,
                finding,
                failing,
                Path(tmp),
                budget_s=budget_s,
                launcher=launcher,
            )
            seconds = time.monotonic() - t0
    finally:
        launcher.close()
    return Shrunk(
        b.name,
        finding,
        schedule,
        result.final,
        seconds,
        result.calls,
        result.reproduction,
        result.one_minimal,
        result.stopped,
        canonical(result.final) in known_forms(b.name, finding),
    )


def validate_known(replays: int) -> list[tuple[str, str, int, int]]:
    """(bug, schedule, failures on the bug's target, failures on the fixed testbed) for each
    known minimal schedule, with P = mgx, `{op}` = run and the first thread assignment."""
    out = []
    launcher = ZygoteLauncher()
    try:
        for b in BUGS:
            for text in KNOWN[b.name]:
                filled = text.replace("{op}", "run").replace(" P", " mgx").replace(" Q", " dml")
                schedule = parse(expand_threads(filled)[0])

                def fails(spec: str, s: Schedule = schedule, bug: Bug = b) -> int:
                    runs = (
                        executor.run(target(spec), s, launcher=launcher) for _ in range(replays)
                    )
                    return sum(any(bug.matches(f) for f in r.findings) for r in runs)

                out.append((b.name, canonical(schedule), fails(b.spec), fails("testbed")))
    finally:
        launcher.close()
    return out


def table(results: Sequence[Shrunk], known: Sequence[tuple[str, str, int, int]], n: int) -> str:
    lines = [
        "| bug | finding | steps before -> after | threads before -> after | shrink s | runs | "
        "reproduced | 1-minimal | stopped | known minimal reached |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        used = (len({s.thread for s in r.before.steps}), len({s.thread for s in r.after.steps}))
        k, m = r.reproduction
        lines.append(
            f"| {r.bug} | {r.finding.kind} on {r.finding.op} [{','.join(r.finding.profiles)}] | "
            f"{len(r.before.steps)} -> {len(r.after.steps)} | {used[0]} -> {used[1]} | "
            f"{r.seconds:.1f} | {r.runs} | {k}/{m} | {'yes' if r.one_minimal else 'no'} | "
            f"{r.stopped} | {'**yes**' if r.known else '**no**'} |"
        )
    lines += ["", "Shrunk schedules (canonical form):", "", "```"]
    lines += [f"{r.bug}: {canonical(r.after)}" for r in results]
    lines += ["```", "", f"The known minimal schedules, each replayed {n} times:", ""]
    lines += ["| bug | known minimal (one of) | shows the bug | on the fixed testbed |"]
    lines += ["|---|---|---|---|"]
    lines += [f"| {b} | `{form}` | {k}/{n} | {f}/{n} |" for b, form, k, f in known]
    return "\n".join(lines)
