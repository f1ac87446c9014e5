"""Issue 27's acceptance for B22 and B23, end to end, with the corpus off: `testbed:B22` finds
the stale in-place input within 120 s and shrinks it to its story (an upload into a kept value,
then a run reading that value in place); `testbed:B23` finds memory freed with a hard-released
session while a value made from it lives (keep, hard_release, then a use of the value). Each
repro.py reproduces at least 18 times in 20."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_scheduling_points_campaign import KNOWN, racefuzz, reproduced


def found_and_shrunk(
    tmp_path: Path, target: str, wanted: Callable[[dict[str, Any]], bool]
) -> tuple[Path, list[dict[str, Any]]]:
    """A 120 s campaign on `target` with the corpus off must find a `wanted` cluster; the
    campaign and its `wanted` clusters that have a bundle (a late find gets 90 s more of
    shrinking first)."""
    common = ["--no-dashboard", "--out", str(tmp_path), "--known", str(KNOWN)]
    done = racefuzz("run", "--target", target, "--seconds", "120", "--no-corpus", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    (campaign,) = tmp_path.iterdir()
    findings = json.loads((campaign / "findings.json").read_text())["findings"]
    hits = [f for f in findings if wanted(f)]
    assert hits and min(f["first_seen_s"] for f in hits) <= 120, findings
    if not any(f["bundle"] for f in hits):
        racefuzz("run", "--resume", str(campaign), "--shrink-only", "--seconds", "90", *common)
        findings = json.loads((campaign / "findings.json").read_text())["findings"]
    return campaign, [f for f in findings if wanted(f) and f["bundle"]]


def ops_of(campaign: Path, finding: dict[str, Any]) -> list[str]:
    steps = json.loads((campaign / finding["bundle"] / "schedule.json").read_text())["steps"]
    return [s["op"] for s in steps]


@pytest.mark.slow
def test_b22_is_found_in_120_s_and_shrinks_to_upload_then_bind(
    tmp_path: Path, testbed_library: Path
) -> None:
    def b22(f: dict[str, Any]) -> bool:
        return (f["kind"], f["op"], f["verdict"]) == ("mismatch", "bind", "new")

    campaign, shrunk = found_and_shrunk(tmp_path, "testbed:B22", b22)
    ops = ops_of(campaign, shrunk[0])
    assert "upload" in ops and ops[-1] == "bind" and ops.index("upload") < len(ops) - 1, ops
    assert len(ops) <= 6, ops
    assert reproduced(campaign / shrunk[0]["bundle"] / "repro.py") >= 18


@pytest.mark.slow
def test_b23_is_found_in_120_s_and_shrinks_to_keep_hard_release_then_a_use(
    tmp_path: Path, testbed_library: Path
) -> None:
    campaign, shrunk = found_and_shrunk(tmp_path, "testbed:B23", lambda f: f["verdict"] == "new")
    # Every new cluster is B23's story: a value kept from a session, the session hard-released,
    # then the value used (with another backend's session made in between, R1 routes an
    # env-level read through that backend, whose fault it then shows).
    for f in shrunk:
        steps = json.loads((campaign / f["bundle"] / "schedule.json").read_text())["steps"]
        ops = [s["op"] for s in steps]
        keep, release = ops.index("keep"), ops.index("hard_release")
        value, session = steps[keep]["value"], steps[keep]["peer"]
        assert keep < release and steps[release]["session"] == session, ops
        assert value in (steps[-1].get("value"), steps[-1].get("peer")), ops
        assert ops[-1] in ("read", "bind", "upload") and len(ops) <= 7, ops
    assert reproduced(campaign / shrunk[0]["bundle"] / "repro.py") >= 18
