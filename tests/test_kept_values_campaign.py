"""Issue 27's acceptance for B22 and B23, end to end, with the corpus off: `testbed:B22` finds
the stale in-place input within 120 s and shrinks it to its story (an upload into a kept value,
then a run reading that value in place); `testbed:B23` finds memory freed with a hard-released
session while a value made from it lives (keep, hard_release, then a use of the value). Each
repro.py reproduces at least 18 times in 20."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_scheduling_points_campaign import KNOWN, racefuzz, reproduced


@pytest.mark.slow
def test_b22_is_found_in_120_s_and_shrinks_to_upload_then_bind(
    tmp_path: Path, testbed_library: Path
) -> None:
    common = ["--no-dashboard", "--out", str(tmp_path), "--known", str(KNOWN)]
    done = racefuzz("run", "--target", "testbed:B22", "--seconds", "120", "--no-corpus", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    (campaign,) = tmp_path.iterdir()
    findings = json.loads((campaign / "findings.json").read_text())["findings"]
    b22 = [f for f in findings if (f["kind"], f["op"], f["verdict"]) == ("mismatch", "bind", "new")]
    assert b22 and min(f["first_seen_s"] for f in b22) <= 120, findings
    if not any(f["bundle"] for f in b22):  # found late: give its shrink the time it needs
        racefuzz("run", "--resume", str(campaign), "--shrink-only", "--seconds", "90", *common)
        findings = json.loads((campaign / "findings.json").read_text())["findings"]
        b22 = [f for f in findings if (f["kind"], f["op"]) == ("mismatch", "bind") and f["bundle"]]
    bundle = campaign / b22[0]["bundle"]
    ops = [s["op"] for s in json.loads((bundle / "schedule.json").read_text())["steps"]]
    assert "upload" in ops and ops[-1] == "bind" and ops.index("upload") < len(ops) - 1, ops
    assert len(ops) <= 6, ops
    assert reproduced(bundle / "repro.py") >= 18


@pytest.mark.slow
def test_b23_is_found_in_120_s_and_shrinks_to_keep_hard_release_then_a_use(
    tmp_path: Path, testbed_library: Path
) -> None:
    common = ["--no-dashboard", "--out", str(tmp_path), "--known", str(KNOWN)]
    done = racefuzz("run", "--target", "testbed:B23", "--seconds", "120", "--no-corpus", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    (campaign,) = tmp_path.iterdir()
    findings = json.loads((campaign / "findings.json").read_text())["findings"]
    new = [f for f in findings if f["verdict"] == "new"]
    assert new and min(f["first_seen_s"] for f in new) <= 120, findings
    if not any(f["bundle"] for f in new):  # found late: give its shrink the time it needs
        racefuzz("run", "--resume", str(campaign), "--shrink-only", "--seconds", "90", *common)
        findings = json.loads((campaign / "findings.json").read_text())["findings"]
        new = [f for f in findings if f["verdict"] == "new" and f["bundle"]]
    # Every new cluster is B23's story: a value kept from s1, s1 hard-released, the value used.
    for f in new:
        bundle = campaign / f["bundle"]
        steps = json.loads((bundle / "schedule.json").read_text())["steps"]
        ops = [s["op"] for s in steps]
        assert ops[:4] == ["register", "create", "keep", "hard_release"], ops
        assert ops[-1] in ("read", "bind", "upload", "copy") and len(ops) <= 6, ops
    assert reproduced(campaign / new[0]["bundle"] / "repro.py") >= 18
