"""Findings a user can trust, end to end through `racefuzz run` on the real testbed: one cluster
per root cause, known issues that do not fail the run, and racefuzz's own faults never passed
off as findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from racefuzz.schedule.op_table import SPECS

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

ROOT = Path(__file__).resolve().parent.parent
KNOWN = ROOT / "testbed" / "known-issues.json"


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "racefuzz", "run", "--out", str(tmp_path), "--no-dashboard", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    folders = [p for p in tmp_path.iterdir() if p.is_dir()] if tmp_path.exists() else []
    data = json.loads((folders[0] / "findings.json").read_text()) if folders else None
    return proc.returncode, proc.stdout + proc.stderr, data


def test_one_native_crash_in_many_overlaps_is_one_cluster_per_computing_op(
    testbed_library: Path, tmp_path: Path
) -> None:
    # Every Compute on the mgx backend dereferences null: a crash with whatever else happens to
    # be in flight (runs, copies, creates on other threads), which used to be dozens of
    # signatures. The crash state (the faulting thread's op) is what identifies it.
    code, out, data = run(
        tmp_path,
        *("--target", "testbed", "--seconds", "15", "--jobs", "2", "--no-shrink"),
        env={"RACEFUZZ_TESTBED_FAULT": "segv:mgx"},
    )
    assert code == 1, out
    crashes = [f for f in data["findings"] if f["kind"] == "crash"]
    # One per op whose thread computes (those the op table races as a run: run, run_bound, feed,
    # run_async, whose pool thread has no Python frame so `on_ort_thread` names it, keep, bind),
    # and one for a torn dump.
    computing = {str(op) for op, spec in SPECS.items() if spec.race_kind == "run"}
    assert crashes and len(crashes) <= len(computing) + 1, [f["cluster"] for f in crashes]
    assert sum(f["signatures"] for f in crashes) > len(crashes), crashes  # variants, merged
    # The faulting thread's op; '' only when two threads crashed at once and faulthandler's
    # dump was torn (then the ops in flight stand in).
    states = {f["crash_state"] for f in crashes}
    assert states & computing and states <= computing | {""}, states


def test_the_fixed_testbed_with_its_known_issues_passes_and_a_bug_build_fails(
    testbed_library: Path, tmp_path: Path
) -> None:
    args = ("--jobs", "2", "--known", str(KNOWN), "--no-shrink")
    code, out, data = run(tmp_path / "fixed", "--target", "testbed", "--seconds", "12", *args)
    assert code == 0, out
    assert data["findings"] and all(f["verdict"] == "known" for f in data["findings"]), out
    # B3's errors on run carry R1's messages ("HIP failure 1: invalid argument"), which every
    # R1 entry of the list has too. A cluster whose error matches a known issue's is no
    # duplicate of it on that alone (it would then pass as known): B3 still fails the run.
    b3 = ("--target", "testbed:B3", "--no-corpus", "--seconds", "10")
    code, out, data = run(tmp_path / "b3", *b3, *args)
    assert code == 1, out
    new = [f for f in data["findings"] if f["verdict"] == "new"]
    # B3 fails runs, and IOBinding runs at bind time: whichever cluster holds the others.
    assert any(f["kind"] == "error" and f["op"] in ("run", "run_bound") for f in new), new


def test_write_known_then_known_turns_the_same_campaign_green(tmp_path: Path) -> None:
    known = tmp_path / "known.json"
    base = ("--target", "testbed:B3", "--seconds", "8", "--jobs", "2", "--no-shrink", "--seed", "3")
    code, out, data = run(tmp_path / "a", *base, "--write-known", str(known))
    assert code == 1 and known.exists(), out
    listed = json.loads(known.read_text())["targets"]["testbed"]
    assert {e["cluster"] for e in listed} == {f["cluster"] for f in data["findings"]}
    code, out, data = run(tmp_path / "b", *base, "--known", str(known))
    assert all(f["verdict"] == "known" for f in data["findings"] if f["cluster"] in str(listed))
    assert code == (1 if any(f["verdict"] == "new" for f in data["findings"]) else 0), out


@pytest.mark.parametrize("content", ["{", '{"version": 1, "targets": {"testbed": [3]}}'])
def test_a_bad_known_issues_file_is_one_line_and_exit_2(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "known.json"
    bad.write_text(content)
    code, out, _ = run(tmp_path / "out", "--seconds", "5", "--known", str(bad))
    assert code == 2 and out.count("\n") == 1 and "known-issues file" in out, out
    assert not (tmp_path / "out").exists()  # checked before any campaign folder is made


def test_many_jobs_on_two_cores_make_no_findings_of_racefuzz_own(tmp_path: Path) -> None:
    # The CPU EP has no bugs: anything found at 8 jobs on 2 cores (events lost when a worker
    # ends, workers starved of CPU) would be racefuzz's own making.
    code, out, data = run(
        tmp_path, "--target", "cpu", "--seconds", "14", "--jobs", "8", "--max-steps", "6"
    )
    assert code == 0, out
    assert data["findings"] == [] and data["schedules"] > 60, out


def test_an_exception_in_racefuzz_itself_is_exit_3_with_a_traceback_not_a_finding(
    tmp_path: Path,
) -> None:
    code, out, data = run(
        tmp_path,
        *("--target", "cpu", "--seconds", "60", "--jobs", "2"),
        env={"RACEFUZZ_SELFTEST_INTERNAL": "run"},
    )
    assert code == 3, out
    assert "internal error (a bug in racefuzz" in out and "Traceback" in out
    assert "KeyError: \"RACEFUZZ_SELFTEST_INTERNAL asked this 'run'" in out
    assert data["internal_errors"] and data["findings"] == []
