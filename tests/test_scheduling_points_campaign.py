"""Issue 26's scheduling-point acceptance, end to end: `testbed[layer]:B21` with the corpus off
finds B21 (another session created between a run's OnRunStart and its Compute) and shrinks it to
a story that holds the run; its repro.py reproduces it 20/20 with the layer, and less than half
the time without (the same steps, no scheduling points)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

KNOWN = Path(__file__).resolve().parent.parent / "testbed" / "known-issues.json"


def racefuzz(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "racefuzz", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=400)


def reproduced(script: Path, *args: str) -> int:
    done = subprocess.run(
        [sys.executable, str(script), "--times", "20", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = re.search(r"reproduced (\d+)/20", done.stdout)
    assert found, done.stdout + done.stderr
    return int(found.group(1))


@pytest.mark.slow
def test_b21_is_found_in_60_s_and_shrinks_to_a_held_run(
    tmp_path: Path, testbed_library: Path
) -> None:
    common = ["--no-dashboard", "--out", str(tmp_path), "--known", str(KNOWN)]
    target = "testbed[layer]:B21"
    done = racefuzz("run", "--target", target, "--seconds", "60", "--no-corpus", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    (campaign,) = tmp_path.iterdir()
    findings = json.loads((campaign / "findings.json").read_text())["findings"]
    b21 = [f for f in findings if f["kind"] == "zeroed" and f["verdict"] == "new"]
    assert b21 and min(f["first_seen_s"] for f in b21) <= 60, findings
    if not any(f["bundle"] for f in b21):  # found late: give its shrink the time it needs
        racefuzz("run", "--resume", str(campaign), "--shrink-only", "--seconds", "90", *common)
        findings = json.loads((campaign / "findings.json").read_text())["findings"]
        b21 = [f for f in findings if f["kind"] == "zeroed" and f["bundle"]]
    bundle = campaign / b21[0]["bundle"]
    steps = json.loads((bundle / "schedule.json").read_text())["steps"]
    holds = [s for s in steps if s["op"] == "hold"]
    assert holds and holds[0]["mode"] in ("run-start", "compute"), steps
    assert reproduced(bundle / "repro.py") == 20
    assert reproduced(bundle / "repro.py", "--no-layer") < 10
