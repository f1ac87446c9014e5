"""`racefuzz doctor`: what a user runs when something is off with their EP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def doctor(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", target],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "160"},
    )


def test_doctor_on_the_fixed_testbed_shows_its_device_memory_and_every_pair_working(
    testbed_library: Path,
) -> None:
    proc = doctor("testbed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "onnxruntime 1.3" in proc.stdout and "library testbed: registered" in proc.stdout
    assert "RacefuzzTestbed" in proc.stdout and "RacefuzzTestbed GPU" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("│ dml", "│ mgx"))]
    assert len(rows) == 6 and all(line.count(" ok ") == 4 for line in rows), rows


def test_doctor_names_a_profile_that_fails_alone(testbed_library: Path) -> None:
    proc = doctor("testbed:B6")  # the backend without an allocator hook breaks alone
    assert proc.returncode == 1
    mgx = [line for line in proc.stdout.splitlines() if line.startswith("│ mgx")]
    assert mgx and all("error" in line for line in mgx)
    assert "fail alone" in proc.stdout


def test_doctor_on_ort_s_own_cpu_ep_needs_no_library() -> None:
    proc = doctor("cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CPUExecutionProvider" in proc.stdout


def test_doctor_says_skipped_not_ok_for_the_steps_after_a_failed_create(
    testbed_library: Path, tmp_path: Path
) -> None:
    config = tmp_path / "racefuzz.toml"
    # The testbed's device is a GPU: asking for an NPU makes every create fail.
    config.write_text(
        '[targets.npu]\nmodels = ["tiny"]\n'
        f'[targets.npu.libraries]\ntb = "{testbed_library}"\n'
        '[targets.npu.profiles.p]\nlibrary = "tb"\nep = "RacefuzzTestbed"\ndevice = "npu"\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", "npu", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("│ p ")]
    assert "error" in row and row.count("skipped") == 2 and " ok " not in row, row
