"""The persistent worker (`worker/persistent.py`, `execute/persistent_pool.py`) on the real
testbed: clean schedules share one process and each run still gets its own trace; a finding
after earlier schedules is reported only once a fresh process shows it; a finding only a
long-lived process reaches (B24's slot leak) is kept in `unconfirmed/` with the schedules before
it; a TSan report in a served schedule is that schedule's finding."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from racefuzz.execute.persistent_pool import PersistentLauncher
from racefuzz.execute.runner import Runner
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import sanitizer
from racefuzz.targets.registry import load_target
from tests.test_hard_release import outlived

KNOWN = Path(__file__).resolve().parent.parent / "testbed" / "known-issues.json"
TWO_SESSIONS = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
        Step(1, Op.CREATE, session="s2", profile="mgx", model="tiny"),
        Step(1, Op.RUN, session="s1"),
        Step(0, Op.RUN, session="s2"),
    ),
    "two",
)
# Ten sessions made and released: 10 of B24's 32 slots, so a fresh process never runs out.
TEN_SESSIONS = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        *(
            step
            for i in range(1, 11)
            for step in (
                Step(0, Op.CREATE, session=f"s{i}", profile="mgx", model="tiny"),
                Step(0, Op.RELEASE, session=f"s{i}"),
            )
        ),
    ),
    "ten",
)


def persistent(spec: str, tmp_path: Path) -> tuple[Runner, PersistentLauncher]:
    target = load_target(spec)
    return Runner(target, unconfirmed_dir=tmp_path / "unconfirmed"), PersistentLauncher(
        target.trace_envs()
    )


def test_clean_schedules_share_one_process_and_each_keeps_its_own_trace(
    testbed_library: Path, tmp_path: Path
) -> None:
    runner, launcher = persistent("testbed", tmp_path)
    try:
        pids, traces = set(), []
        for _ in range(3):
            result = runner.run(TWO_SESSIONS, launcher)
            assert not result.findings and result.exit == "clean", result.stderr_tail
            pids.add(launcher.process_id)
            traces.append(result.trace)
        assert len(pids) == 1 and launcher.earlier != ()
        # The library keeps the trace file it opened first; each run gets its own part of it.
        computes = [sum(1 for line in t if line.get("ev") == "compute") for t in traces]
        assert computes[0] >= 2 and computes == computes[:1] * 3, computes
    finally:
        launcher.close()


def test_a_finding_after_earlier_schedules_is_reported_from_a_fresh_process(
    testbed_library: Path, tmp_path: Path
) -> None:
    runner, launcher = persistent("testbed:B23", tmp_path)
    try:
        assert not runner.run(TWO_SESSIONS, launcher).findings
        first = launcher.process_id
        result = runner.run(outlived("mgx"), launcher)
        assert any("illegal memory access" in f.message for f in result.findings)
        # Confirmed by a rerun in a new process, whose first schedule it was.
        assert launcher.earlier == () and launcher.process_id != first
        # The same defect again in that process: its identity is confirmed, no new process.
        again = runner.run(outlived("mgx"), launcher)
        assert again.findings and len(launcher.earlier) == 1
    finally:
        launcher.close()
    assert not (tmp_path / "unconfirmed").exists()


def test_a_shrinks_runner_confirms_every_failure_afresh(
    testbed_library: Path, tmp_path: Path
) -> None:
    runner, launcher = persistent("testbed:B23", tmp_path)
    strict = replace(runner, strict=True)  # as `shrink_to_bundle` runs its candidates
    try:
        for _ in range(2):
            assert not strict.run(TWO_SESSIONS, launcher).findings
            assert strict.run(outlived("mgx"), launcher).findings
            assert launcher.earlier == ()  # each failure came from a fresh process
    finally:
        launcher.close()


def test_a_leak_only_a_long_lived_process_reaches_is_kept_unconfirmed(
    testbed_library: Path, tmp_path: Path
) -> None:
    runner, launcher = persistent("testbed:B24", tmp_path)
    try:
        for _ in range(3):  # 30 of the 32 slots
            assert not runner.run(TEN_SESSIONS, launcher).findings
        # The fourth runs out in this process; three fresh ones never do: no finding reported.
        result = runner.run(TEN_SESSIONS, launcher)
        assert not result.findings
    finally:
        launcher.close()
    (record,) = sorted((tmp_path / "unconfirmed").glob("*.json"))
    saved = json.loads(record.read_text(encoding="utf-8"))
    assert [f["op"] for f in saved["findings"]] == ["create"]
    assert "no free EP context" in saved["findings"][0]["message"]
    assert len(saved["earlier_schedules"]) == 3
    assert saved["schedule"]["steps"] == saved["earlier_schedules"][0]["steps"]


@pytest.mark.slow
@pytest.mark.skipif(not sanitizer.available("thread"), reason="no TSan runtime (libtsan)")
def test_a_tsan_report_in_a_served_schedule_is_that_schedules_finding(tmp_path: Path) -> None:
    from tests.test_sanitizer_testbed import RACE, RACE_MESSAGE

    target = load_target("testbed[tsan]:B9")
    runner = Runner(target)
    launcher = runner.launcher()
    assert isinstance(launcher, PersistentLauncher)
    try:
        for _ in range(2):
            assert not runner.run(TWO_SESSIONS, launcher).findings
        for _ in range(6):
            result = runner.run(RACE, launcher)
            if result.findings:
                break
    finally:
        launcher.close()
    assert [(f.kind, f.message) for f in result.findings] == [("tsan", RACE_MESSAGE)]
    assert "WARNING: ThreadSanitizer: data race" in result.stderr_tail


@pytest.mark.slow
@pytest.mark.skipif(not sanitizer.available("thread"), reason="no TSan runtime (libtsan)")
def test_a_tsan_campaign_keeps_what_it_could_not_confirm_and_reports_no_cluster_of_it(
    tmp_path: Path,
) -> None:
    command = [
        *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed[tsan]:B24"),
        *("--seconds", "40", "--jobs", "1", "--no-corpus", "--no-shrink", "--no-dashboard"),
        *("--known", str(KNOWN), "--out", str(tmp_path)),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    (folder,) = tmp_path.iterdir()
    records = sorted((folder / "unconfirmed").glob("*.json"))
    assert records, proc.stdout[-3000:]
    assert "seen only after earlier schedules in one worker process" in proc.stdout
    found = json.loads((folder / "findings.json").read_text(encoding="utf-8"))["findings"]
    assert not [f for f in found if "no free EP context" in f["message"]], found
    saved = json.loads(records[0].read_text(encoding="utf-8"))
    assert "no free EP context" in saved["findings"][0]["message"] and saved["earlier_schedules"]


def test_persistent_is_a_campaign_option_that_resume_keeps(
    testbed_library: Path, tmp_path: Path
) -> None:
    command = [
        *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed:B6", "--persistent"),
        *("--seconds", "15", "--jobs", "1", "--no-corpus", "--no-shrink", "--no-dashboard"),
        *("--known", str(KNOWN), "--out", str(tmp_path)),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    (folder,) = tmp_path.iterdir()
    saved = json.loads((folder / "findings.json").read_text(encoding="utf-8"))
    assert saved["persistent"] is True, proc.stdout[-2000:]
    assert any(
        f["verdict"] == "new" and "Failed to find allocator" in f["message"]
        for f in saved["findings"]
    ), proc.stdout[-3000:]
