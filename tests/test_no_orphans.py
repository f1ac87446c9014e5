"""A campaign against an EP that hangs leaves no worker behind when it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes


def marked(mark: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("RACEFUZZ_TEST_MARK") == mark:
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def test_a_hung_ep_leaves_no_worker_alive_after_the_campaign(
    testbed_library: Path, tmp_path: Path
) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, "RACEFUZZ_TESTBED_FAULT": "hang:mgx", "RACEFUZZ_TEST_MARK": mark}
    # The first hangs are found at ~6.5 s; their baselines (on the same hung EP) are still in
    # flight when the time is up at 10 s, in threads the campaign abandons.
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed", "--seconds", "10"),
            *("--jobs", "2", "--step-timeout", "5", "--no-dashboard", "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    left = marked(mark)
    assert left == [], [p.cmdline() for p in left]
