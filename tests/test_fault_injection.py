"""racefuzz and its workers killed at random points (SIGKILL, SIGTERM), 20 times over one
campaign folder, then `--resume`: every finding and every bundle is kept, exactly once.

Real processes and real signals: the campaign is the racefuzz CLI on the testbed with B3 (several
clusters within seconds), and the faults land wherever the random delays put them: in start-up,
mid-fuzzing, mid-shrink, mid-bundle, in the summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
from test_no_orphans import marked

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

FAULTS = 20


def campaign(out: Path, folder: Path | None, seconds: float, env: dict[str, str]) -> list[str]:
    where = ["--resume", str(folder)] if folder else ["--out", str(out)]
    return [
        *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed:B3", "--jobs", "2"),
        *("--seconds", str(seconds), "--shrink-budget", "10", "--no-dashboard", *where),
    ]


def listed(folder: Path) -> list[dict[str, Any]]:
    path = folder / "findings.json"
    if not path.exists():
        return []
    found: list[dict[str, Any]] = json.loads(path.read_text())["findings"]
    return found


def inject(proc: subprocess.Popen[bytes], mark: str, rng: random.Random) -> str:
    """One fault: the parent or one of its workers (the zygote too), SIGKILL or SIGTERM."""
    sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
    children = [p for p in marked(mark) if p.pid != proc.pid]
    if children and rng.random() < 0.4:
        victim = rng.choice(children)
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.send_signal(sig)
        time.sleep(rng.uniform(0.2, 1.5))  # the campaign goes on without that worker...
        proc.send_signal(signal.SIGKILL)  # ...until its parent dies too
        return f"worker {sig.name}, then parent SIGKILL"
    proc.send_signal(sig)
    return f"parent {sig.name}"


def test_twenty_kills_then_resume_keep_every_finding_and_bundle_exactly_once(
    testbed_library: Path, tmp_path: Path
) -> None:
    rng = random.Random(20261203)  # the same faults in every run of the test
    mark = uuid.uuid4().hex
    env = {**os.environ, "RACEFUZZ_TEST_MARK": mark}
    out = tmp_path / "out"
    folder: Path | None = None
    ever: set[str] = set()
    for n in range(FAULTS):
        proc = subprocess.Popen(
            campaign(out, folder, 60, env),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.3, 2.5))
        what = inject(proc, mark, rng)
        _, err = proc.communicate(timeout=60)
        assert b"Traceback" not in err, f"fault {n} ({what}):\n{err.decode()}"
        (folder,) = [p for p in out.iterdir() if p.is_dir()]
        now = {f["cluster"] for f in listed(folder)}
        assert ever <= now, f"fault {n} ({what}) lost {ever - now}"
        ever |= now
    assert folder is not None
    done = subprocess.run(
        campaign(out, folder, 40, env), env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 1, done.stderr  # B3 is a real bug: the campaign fails
    assert "Traceback" not in done.stderr
    found = listed(folder)
    clusters = [f["cluster"] for f in found]
    assert len(clusters) == len(set(clusters)), "a cluster listed twice"
    assert ever <= set(clusters) and ever
    assert not any(f["message"] in ("SIGKILL", "SIGTERM") for f in found), "a kill was a finding"
    # Bundles: one per cluster at most, none half written. A bundle listed by two clusters is
    # a duplicate's, which the cluster it repeats adopted as its better reproducer; a bundle
    # on disk that no cluster lists is one such an adoption replaced, still its cluster's.
    bundles = [f["bundle"] for f in found if f["bundle"]]
    by_cluster = {f["cluster"]: f for f in found}
    for b in set(bundles):
        holders = [f for f in found if f["bundle"] == b]
        primaries = [f for f in holders if not f["duplicate_of"]]
        assert len(primaries) <= 1, [f["cluster"] for f in holders]
        assert all(f["duplicate_of"] in by_cluster for f in holders if f["duplicate_of"]), b
    on_disk = {p.name for p in folder.iterdir() if p.is_dir()} - {"findings", "corpus"}
    assert set(bundles) <= on_disk
    for b in on_disk - set(bundles):
        shown = json.loads((folder / b / "finding.json").read_text())
        assert by_cluster.get(shown["cluster"], {}).get("bundle"), b
    assert all((folder / b / "report.md").is_file() for b in bundles)
    # How many shrinks finish in the last 40 s (the clusters' baselines come first) depends on
    # the machine's load; that each finished one left its bundle does not.
    assert bundles and all(f["bundle"] for f in found if f["state"].startswith("shrunk")), [
        (f["state"], f["bundle"]) for f in found
    ]
    half = [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]
    assert not half, "temporary files or bundles left behind"
    assert all(p.stat().st_size for p in folder.rglob("*.json")), "an empty JSON file"
    # Every finding's first schedule is on disk.
    assert all((folder / f["original"]).is_file() for f in found)
    deadline = time.monotonic() + 10
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not marked(mark), "processes of a killed campaign outlived it"
