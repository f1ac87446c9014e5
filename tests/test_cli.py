"""The command line: bad input is one line and exit 2; findings exit 1; clean exits 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"


def racefuzz(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_a_malformed_schedule_is_one_line_naming_the_step(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "version": 1,
                "threads": 1,
                "steps": [
                    {"thread": 0, "op": "register"},
                    {"thread": 0, "op": "run", "session": "s1"},
                ],
            }
        )
    )
    line = one_error_line(racefuzz("replay", str(bad), "--target", "cpu"))
    assert line == f"racefuzz: error: {bad}: step 1: 'run' of session 's1' before its 'create'"


def test_a_schedule_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    line = one_error_line(racefuzz("replay", str(bad), "--target", "cpu"))
    assert line.startswith(f"racefuzz: error: {bad}: not valid JSON")


def test_an_unknown_schedule_version_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "v9.json"
    bad.write_text(json.dumps({"version": 9, "threads": 1, "steps": []}))
    line = one_error_line(racefuzz("replay", str(bad), "--target", "cpu"))
    assert line == (
        f"racefuzz: error: {bad}: unsupported schedule version 9 (this racefuzz reads 1)"
    )


def test_an_unknown_profile_is_one_line(tmp_path: Path) -> None:
    s = tmp_path / "p.json"
    s.write_text(
        json.dumps(
            {
                "version": 1,
                "threads": 1,
                "steps": [
                    {"thread": 0, "op": "register"},
                    {
                        "thread": 0,
                        "op": "create",
                        "session": "s1",
                        "profile": "npu9",
                        "model": "tiny",
                    },
                ],
            }
        )
    )
    line = one_error_line(racefuzz("replay", str(s), "--target", "cpu"))
    assert line == f"racefuzz: error: {s}: target 'cpu' has no profile 'npu9'"


def test_a_missing_ep_library_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "racefuzz.toml").write_text(
        '[targets.mine]\n[targets.mine.libraries]\nmine = "nope/libmine_ep.so"\n'
        '[targets.mine.profiles.gpu]\nlibrary = "mine"\nep = "MineEP"\n'
    )
    line = one_error_line(racefuzz("doctor", "--target", "mine", cwd=tmp_path))
    assert line.startswith("racefuzz: error: ")
    assert "cannot load EP library" in line and "libmine_ep.so': no such file" in line


def test_an_unknown_target_and_a_bad_flag_are_one_line_each() -> None:
    assert "unknown target" in one_error_line(racefuzz("replay", str(SCHEDULES), "--target", "x"))
    assert one_error_line(racefuzz("replay", str(SCHEDULES), "--times", "0", "--target", "cpu"))
    assert one_error_line(racefuzz("frobnicate"))


@pytest.mark.parametrize("target", ["cpu", "nxrt-cpu"])
def test_the_seed_corpus_runs_clean_on_eps_without_the_seeds_bugs(target: str) -> None:
    proc = racefuzz("replay", str(SCHEDULES), "--target", target)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "9 schedule(s) replayed x1, 0 with findings, 0 skipped" in proc.stdout


def test_a_real_crash_after_api_misuse_is_reported_as_misuse_with_its_stacks() -> None:
    # Found by racefuzz in nxrt-ep-cpu 0.1.0.dev6 before it modelled ORT's contract: the
    # library is unregistered while a session on it is alive (see the schedule's description).
    found = SCHEDULES / "misuse" / "nxrt_unregister_on_another_thread.json"
    proc = racefuzz("replay", str(found), "--target", "nxrt-cpu", "--times", "3")
    # Shown, labelled, and not an EP bug: misuse alone does not fail the replay.
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "API MISUSE" in proc.stdout and "1 API misuse only" in proc.stdout
    assert "teardown (drop what is left alive) │ crash in flight" in proc.stdout
    assert "│ crash │ teardown │" in proc.stdout and "SIGSEGV" in proc.stdout
    assert "3/3" in proc.stdout
    assert "Fatal Python error: Segmentation fault" in proc.stdout
    assert "in teardown" in proc.stdout  # the faulthandler stack names the worker's step


def test_help_speaks_to_users_and_version_names_onnxruntime() -> None:
    import onnxruntime

    shown = racefuzz("--version")
    assert shown.returncode == 0
    assert shown.stdout.strip() == f"racefuzz 0.1.0 (onnxruntime {onnxruntime.__version__})"
    top = racefuzz("--help").stdout
    assert "Fuzz the orders of calls" in top and "exit codes: 0 nothing new" in top
    assert "parses arguments" not in top  # the module's docstring is for its readers
    flat = " ".join(racefuzz("run", "--help").stdout.split())
    assert "seconds one step may take before it is a hang" in flat
    assert "most steps in a schedule" in flat
    flat = " ".join(racefuzz("shrink", "--help").stdout.split())
    assert "seconds the shrink may take, its replays included" in flat
