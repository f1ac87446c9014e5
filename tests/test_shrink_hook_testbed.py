"""The campaign's shrink hook (`shrink_hook.make_shrink_hook`) on the real testbed: a budget
spent before any replay is said as such, and going on from a shrink cut short never loses the
bundle that reproduced, and shrinking again keeps whichever reproducer is better."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_repro_testbed import S3

from racefuzz.campaign.state import FindingRecord, dependable
from racefuzz.cli.shrink_hook import make_shrink_hook
from racefuzz.execute import executor
from racefuzz.execute.runner import Runner
from racefuzz.schedule.model import Schedule
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes


def test_a_spent_budget_is_said_and_a_further_shrink_that_fails_keeps_the_bundle(
    testbed_library: Path, tmp_path: Path
) -> None:
    target = load_target("testbed:B3")
    failing = executor.run(target, S3)
    finding = next(f for f in failing.findings if f.kind == "error" and f.op == "run")
    (tmp_path / "findings").mkdir()
    rec = FindingRecord(finding, 1, 0.0, tmp_path / "findings" / "b3.json", S3, failing)
    # A budget that is over before the shrink has measured the original: nothing replayed.
    hook = make_shrink_hook(Runner(target), "testbed:B3", 1e-6, tmp_path)
    hook(rec, S3, failing, None)
    assert rec.state == "not reproduced (its budget ran out before any replay)"
    assert rec.minimal is None and rec.reproduction == (0, 0)
    # A cluster whose shrink was cut short after it reproduced: going on, with no time again,
    # confirms nothing, so the bundle and schedule that reproduced stay.
    earlier = tmp_path / "earlier-bundle"
    earlier.mkdir()
    rec.minimal, rec.reproduction, rec.bundle, rec.cut_short = S3, (18, 20), earlier, True
    bundles = {p for p in tmp_path.iterdir() if p.is_dir()}
    hook(rec, S3, failing, None)
    assert (rec.minimal, rec.reproduction, rec.bundle) == (S3, (18, 20), earlier)
    assert rec.state == (
        "shrunk, reproduced 18/20, its budget ran out before it was 1-minimal; "
        "shrinking it again found no better reproducer (none reproduced, 0/0)"
    )
    assert {p for p in tmp_path.iterdir() if p.is_dir()} == bundles  # its bundle was removed


def test_shrinking_again_keeps_the_better_reproducer(testbed_library: Path, tmp_path: Path) -> None:
    target = load_target("testbed:B3")
    failing = executor.run(target, S3)
    finding = next(f for f in failing.findings if f.kind == "error" and f.op == "run")
    (tmp_path / "findings").mkdir()
    rec = FindingRecord(finding, 1, 0.0, tmp_path / "findings" / "b3.json", S3, failing)
    hook = make_shrink_hook(Runner(target), "testbed:B3", 5.0, tmp_path)
    # A reproducer failing 2 runs in 20 (as --shrink-only retries): the B3 bug always shows,
    # so the new shrink's is dependable, and replaces it (at as many steps, if 5 s cut it).
    weak = tmp_path / "weak-bundle"
    weak.mkdir()
    rec.minimal, rec.reproduction, rec.bundle = S3, (2, 20), weak
    hook(rec, S3, failing, None)
    assert rec.bundle != weak and rec.bundle is not None and rec.bundle.is_dir()
    assert rec.minimal is not None and len(rec.minimal.steps) <= len(S3.steps)
    k, n = rec.reproduction
    assert dependable((k, n)) and rec.state.startswith(f"shrunk, reproduced {k}/{n}")
    # One shorter than any this shrink can reach stays, with its bundle; the new one goes.
    shorter = Schedule(S3.threads, S3.steps[:2])
    bundles = {p for p in tmp_path.iterdir() if p.is_dir()}
    rec.minimal, rec.reproduction, rec.bundle, rec.cut_short = shorter, (20, 20), weak, False
    hook(rec, S3, failing, None)
    assert (rec.minimal, rec.reproduction, rec.bundle) == (shorter, (20, 20), weak)
    assert rec.state.startswith("shrunk, reproduced 20/20; shrinking it again found no better")
    assert {p for p in tmp_path.iterdir() if p.is_dir()} == bundles
