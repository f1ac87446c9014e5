"""Shrinking real failures of the testbed ends at each bug's known minimal schedule.

The originals in tests/data/shrink/ are the first schedules of at least 20 steps on at least 3
threads that a seeded random walk found failing with each bug's symptom (for R1, the fixed
testbed). The minimal schedules are the seed's stories, e.g. B3 is "session 1 CreateEp (DML),
session 2 CreateEp (MGX), session 1 Run": either backend may play either part.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from racefuzz.execute import executor
from racefuzz.execute.zygote_pool import ZygoteLauncher, available
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule
from racefuzz.shrink import shrinker as shrink
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

DATA = Path(__file__).resolve().parent / "data" / "shrink"
NOT_FOUND = "Data transfer implementation between source and destination device was not found"


def story(schedule: Schedule) -> list[str]:
    """Steps as `thread:op subject profile` with the two profiles named A and B by first use."""
    names: dict[str, str] = {}
    out = []
    for s in schedule.steps:
        if s.profile and s.profile not in names:
            names[s.profile] = "AB"[len(names)]  # the originals use two profiles
        p = names.get(s.profile or "", "")
        subject = s.session or s.value or ""
        group = "*" if s.group is not None else ""
        out.append(f"{s.thread}:{s.op} {subject} {p}{group}".strip())
    return out


CREATE_A, CREATE_B = "0:create s1 A", "0:create s2 B"
CASES: dict[str, tuple[str, object, list[list[str]]]] = {
    # bug: (target, symptom, accepted minimal stories)
    "B1": (
        "testbed:B1",
        lambda f: f.kind == "error" and f.op == "run",
        [["0:register", CREATE_A, CREATE_B, "0:run s1"]],
    ),
    "B2": (
        "testbed:B2",
        lambda f: f.kind == "error" and NOT_FOUND in f.message,
        [["0:register", CREATE_A, "0:alloc v1 A"], ["0:register", CREATE_A, "0:copy  A"]],
    ),
    "B3": (
        "testbed:B3",
        lambda f: f.kind == "error" and f.op == "run",
        [["0:register", CREATE_A, CREATE_B, "0:run s1"]],
    ),
    "B4": (
        "testbed:B4",
        lambda f: f.kind == "error" and f.op == "run",
        [["0:register", CREATE_A, CREATE_B, "0:run s1"]],
    ),
    "B5": (
        "testbed:B5",
        lambda f: f.kind == "zeroed" and f.op == "run",
        [["0:register", CREATE_A, "1:run s1"]],
    ),
    "B6": (
        "testbed:B6",
        lambda f: f.kind == "error" and f.profiles == ("mgx",),
        [["0:register", CREATE_A, "0:run s1"]],
    ),
    "B7": (
        "testbed:B7",
        lambda f: f.kind in ("zeroed", "mismatch") and f.op == "run",
        [["0:register", CREATE_A, "1:run s1"]],
    ),
    "B8": (
        "testbed:B8",
        lambda f: f.kind == "error" and f.op == "run",
        # Two creates overlapping on two threads, then either session runs on either thread.
        [
            ["0:register", f"{a}:create s1 A*", f"{b}:create s2 B*", f"{t}:run {s}"]
            for a, b in ("01", "10")
            for t in "01"
            for s in ("s1", "s2")
        ],
    ),
    "R1": (
        "testbed",
        lambda f: f.kind == "error" and f.op == "read",
        [["0:register", CREATE_A, "0:alloc v1 A", CREATE_B, "0:read v1"]],
    ),
}


@pytest.mark.parametrize("bug", sorted(CASES))
def test_shrinking_ends_at_the_known_minimal_schedule_and_it_is_one_minimal(
    testbed_library: Path, bug: str
) -> None:
    spec, symptom, accepted = CASES[bug]
    target = load_target(spec)
    original = load(DATA / f"{bug}.json")
    assert len(original.steps) >= 20 and len({s.thread for s in original.steps}) >= 3
    launcher = ZygoteLauncher() if available() else None
    try:

        def run(s: Schedule) -> RunResult:
            return executor.run(target, s, launcher=launcher)

        finding: Finding | None = None
        for _ in range(20):  # B8 is a race: its original does not fail every time
            found = [f for f in run(original).findings if symptom(f)]  # type: ignore[operator]
            if found:
                finding = found[0]
                break
        assert finding is not None
        result = shrink.shrink(
            original,
            finding.signature,
            run,
            models_by_size=target.models,
            library_of=target.library_of,
        )
    finally:
        if launcher is not None:
            launcher.close()
    assert story(result.final) in accepted, story(result.final)
    assert result.one_minimal and result.final.models() == {"tiny"}
    k, n = result.reproduction
    assert n == 20 and k >= (1 if bug == "B8" else 18), result.reproduction
    assert all(s.op is not Op.RUN_BOUND for s in result.final.steps)
