"""--out on a disk that fills up: one line, exit 2, and what was found is on disk, complete.

A real small tmpfs (root and mount rights needed; skipped with the reason otherwise).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes


@pytest.fixture
def small_disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    size = getattr(request, "param", "700k")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or 'no rights'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def campaign(out: Path, seconds: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed:B3"),
            *("--seconds", str(seconds), "--no-dashboard", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_disk_that_fills_mid_campaign_stops_it_with_one_line_and_a_complete_summary(
    testbed_library: Path, small_disk: Path
) -> None:
    done = campaign(
        small_disk, 60
    )  # bundles fill 700 KiB (512 of them the reserve) long before 60 s
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "No space left on device; the campaign stopped after" in line
    assert "what it found is in" in line
    (folder,) = [p for p in small_disk.iterdir() if p.is_dir()]
    data = json.loads((folder / "findings.json").read_text())  # complete JSON, not cut
    assert data["findings"], "the clusters found before the disk filled are listed"
    assert "# racefuzz campaign" in (folder / "summary.md").read_text()
    assert all((folder / f["original"]).stat().st_size for f in data["findings"])
    stray = [p.name for p in folder.rglob("*") if p.name.startswith(".")]
    assert not stray, "temporary files, half bundles or the reserve left behind"
    assert all(p.stat().st_size for p in folder.rglob("*.json")), "an empty JSON file"


@pytest.mark.parametrize("small_disk", ["200k"], indirect=True)
def test_a_disk_too_full_to_start_is_one_line_and_leaves_no_folder(
    testbed_library: Path, small_disk: Path
) -> None:
    done = campaign(small_disk, 5)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("racefuzz: error: cannot write results under")
    assert line.endswith("(racefuzz needs at least 512 KiB free there)")
    assert not list(small_disk.iterdir())
