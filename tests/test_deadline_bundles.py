"""A campaign that ends at its deadline leaves its folder as consistent as a resume would: no
temporary bundle, no claimed but empty bundle name, every bundle findings.json lists complete,
and no complete bundle that no cluster lists. `--shrink-only` with one-second shrink budgets
writes a bundle every half second or so on two jobs; thirty deadlines spread over the run land
some of them while a bundle is being written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEADLINES = [2.0 + 0.2 * i for i in range(30)]
BUNDLE_FILES = ("report.md", "schedule.json", "original.json", "repro.py", "env.json")


def racefuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", *args, "--no-dashboard"],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def unshrunk(testbed_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unshrunk")
    found = racefuzz(
        *("run", "--target", "testbed:B1,B3,B4", "--seconds", "4", "--no-shrink"),
        *("--no-corpus", "--out", str(out)),
    )
    assert found.returncode == 1, found.stdout + found.stderr
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    clusters = json.loads((folder / "findings.json").read_text())["findings"]
    assert len(clusters) >= 3, [f["cluster"] for f in clusters]
    return folder


def inconsistencies(folder: Path) -> list[str]:
    data = json.loads((folder / "findings.json").read_text())
    listed = {f["bundle"] for f in data["findings"] if f["bundle"]}
    wrong = [f"temporary: {p.name}" for p in folder.glob(".tmp-*")]
    for p in folder.iterdir():
        if not p.is_dir() or p.name in ("findings", "corpus"):
            continue
        if not any(p.iterdir()):
            wrong.append(f"claimed but empty: {p.name}")
        elif p.name not in listed:
            wrong.append(f"not listed: {p.name}")
    for name in listed:
        missing = [f for f in BUNDLE_FILES if not (folder / name / f).is_file()]
        if missing:
            wrong.append(f"listed but incomplete: {name} lacks {missing}")
    return wrong


def test_a_deadline_during_bundle_writing_leaves_a_consistent_folder(
    unshrunk: Path, tmp_path: Path
) -> None:
    def one(i: int) -> tuple[float, int, list[str]]:
        folder = tmp_path / f"run{i}"
        shutil.copytree(unshrunk, folder)
        done = racefuzz(
            *("run", "--resume", str(folder), "--shrink-only", "--jobs", "2"),
            *("--seconds", f"{DEADLINES[i]:.1f}", "--shrink-budget", "1"),
        )
        assert done.returncode in (0, 1), done.stdout + done.stderr
        written = len(json.loads((folder / "findings.json").read_text())["findings"])
        return DEADLINES[i], written, inconsistencies(folder)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, range(len(DEADLINES))))
    bad = {deadline: wrong for deadline, _, wrong in results if wrong}
    assert not bad, bad
