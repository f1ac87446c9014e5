"""The campaign's shrink hook (`run_command.make_shrink_hook`) on the real testbed: a budget
spent before any replay is said as such, and going on from a shrink cut short never loses the
bundle that reproduced."""

from __future__ import annotations

from pathlib import Path

from test_repro_testbed import S3

from racefuzz import executor
from racefuzz.campaign_state import FindingRecord
from racefuzz.run_command import make_shrink_hook
from racefuzz.target import load_target


def test_a_spent_budget_is_said_and_a_further_shrink_that_fails_keeps_the_bundle(
    testbed_library: Path, tmp_path: Path
) -> None:
    target = load_target("testbed:B3")
    failing = executor.run(target, S3)
    finding = next(f for f in failing.findings if f.kind == "error" and f.op == "run")
    (tmp_path / "findings").mkdir()
    rec = FindingRecord(finding, 1, 0.0, tmp_path / "findings" / "b3.json", S3, failing)
    # A budget that is over before the shrink has measured the original: nothing replayed.
    hook = make_shrink_hook(target, "testbed:B3", executor.RunOptions(), 1e-6, tmp_path)
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
    assert rec.state == "shrunk, reproduced 18/20; going on from it did not (0/0)"
    assert {p for p in tmp_path.iterdir() if p.is_dir()} == bundles  # its bundle was removed
