"""`racefuzz shrink` and `racefuzz report` from the command line, on a real testbed failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "shrink"


def racefuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_shrink_writes_a_bundle_that_report_re_renders_byte_for_byte(
    testbed_library: Path, tmp_path: Path
) -> None:
    proc = racefuzz(
        "shrink", str(DATA / "B3.json"), "--target", "testbed:B3", "--out", str(tmp_path)
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # it still reproduces: a finding
    assert "26 -> 4 steps (1-minimal), reproduced 20/20" in proc.stdout.replace("\n", " ")
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    before = (bundle / "report.md").read_text()
    again = racefuzz("report", str(bundle))
    assert again.returncode == 0, again.stderr
    assert (bundle / "report.md").read_text() == before
    assert not list(tmp_path.glob(".*.best.json"))  # the running best is cleaned up


def test_report_of_a_folder_that_is_no_bundle_is_one_line(tmp_path: Path) -> None:
    proc = racefuzz("report", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"racefuzz: error: '{tmp_path}' is not a report bundle (no finding.json)"
    )
