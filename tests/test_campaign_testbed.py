"""Campaigns find each seeded testbed bug without hints (no corpus), and only R1 in the fix.

Each campaign stops at the first finding that is the bug's own symptom (`stop_when`), with the
issue's 60 s as the cap; the fixed design must show none of those symptoms.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.loop import Campaign
from racefuzz.campaign.state import CampaignState
from racefuzz.judge.outcome import Finding

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

NOT_FOUND = "Data transfer implementation between source and destination device was not found"


SYMPTOMS: dict[str, Callable[[Finding], bool]] = {
    "B1": lambda f: f.kind == "error" and f.op == "run",
    "B2": lambda f: f.kind == "error" and NOT_FOUND in f.message,
    "B3": lambda f: f.kind == "error" and f.op == "run",
    "B4": lambda f: f.kind == "error" and f.op == "run",
    "B5": lambda f: f.kind == "zeroed" and f.op == "run",
    "B6": lambda f: f.kind == "error" and f.op == "run" and f.profiles in (("mgx",), ("mgx1",)),
    "B7": lambda f: f.kind in ("zeroed", "mismatch") and f.op == "run",
    "B8": lambda f: f.kind in ("error", "zeroed", "mismatch") and f.op == "run",
}


def campaign(
    spec: str, tmp_path: Path, seconds: float, stop: Callable[[Finding], bool] | None
) -> CampaignState:
    from racefuzz.targets.registry import load_target

    config = CampaignConfig(seconds=seconds, jobs=2, seed=1, shrink=False)
    c = Campaign(load_target(spec), config, tmp_path, stop_when=stop)
    return trio.run(c.run)


@pytest.mark.parametrize("bug", sorted(SYMPTOMS))
def test_a_campaign_without_corpus_finds_each_seeded_bug(
    testbed_library: Path, tmp_path: Path, bug: str
) -> None:
    state = campaign(f"testbed:{bug}", tmp_path, 60, SYMPTOMS[bug])
    hits = [r for r in state.findings.values() if SYMPTOMS[bug](r.finding)]
    assert hits, [r.finding.signature for r in state.findings.values()]
    # The finding was on disk before anything else happened to it.
    assert hits[0].original.exists()


def test_the_fixed_testbed_shows_none_of_the_bug_symptoms_only_r1(
    testbed_library: Path, tmp_path: Path
) -> None:
    state = campaign("testbed", tmp_path, 20, None)
    assert state.schedules > 50
    for rec in state.findings.values():
        f = rec.finding
        assert not any(symptom(f) for symptom in SYMPTOMS.values()), f.signature
        # R1: env-level device memory (read, upload, or IOBinding through env-allocated or kept
        # values) routed to the backend that does not own it.
        assert f.op in ("read", "run_bound", "copy", "compute", "upload", "bind", "keep"), (
            f.signature
        )


def test_a_target_that_segfaults_on_most_schedules_does_not_stop_the_campaign(
    testbed_library: Path, tmp_path: Path
) -> None:
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "racefuzz",
            "run",
            "--target",
            "testbed",
            "--seconds",
            "25",
            "--jobs",
            "2",
            "--out",
            str(tmp_path),
            "--no-dashboard",
            "--shrink-budget",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RACEFUZZ_TESTBED_FAULT": "segv:mgx"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    data = json.loads((folder / "findings.json").read_text())
    summary = (folder / "summary.md").read_text()
    crashes = [f for f in data["findings"] if f["kind"] == "crash"]
    assert crashes and all(f["message"] == "SIGSEGV" for f in crashes)
    assert data["schedules"] >= 40, summary  # crashes cost their run, not the campaign
    assert (folder / crashes[0]["original"]).exists()
    shrunk = [f for f in crashes if f["bundle"]]
    if not shrunk:  # the other clusters' shrinks came first: go on as the last line says
        resume = ["run", "--resume", str(folder), "--shrink-only", "--seconds", "60"]
        subprocess.run(
            [sys.executable, "-m", "racefuzz", *resume, "--no-dashboard", "--shrink-budget", "20"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "RACEFUZZ_TESTBED_FAULT": "segv:mgx"},
        )
        data = json.loads((folder / "findings.json").read_text())
        shrunk = [f for f in data["findings"] if f["kind"] == "crash" and f["bundle"]]
    assert shrunk, summary
    report = (folder / shrunk[0]["bundle"] / "report.md").read_text()
    assert "Fatal Python error: Segmentation fault" in report


def test_resume_keeps_every_earlier_finding_once_and_reopens_none(
    testbed_library: Path, tmp_path: Path
) -> None:
    import json
    import subprocess
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "racefuzz",
                "run",
                "--target",
                "testbed:B3",
                "--seconds",
                "6",
                "--no-dashboard",
                "--no-shrink",
                "--out",
                str(tmp_path),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert run().returncode == 1
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    first = {f["cluster"] for f in json.loads((folder / "findings.json").read_text())["findings"]}
    again = run("--resume", str(folder), "--seed", "9")
    assert again.returncode == 1, again.stderr
    data = json.loads((folder / "findings.json").read_text())
    clusters = [f["cluster"] for f in data["findings"]]
    assert first <= set(clusters) and len(clusters) == len(set(clusters))
    opened = again.stdout.count("NEW ")
    assert opened == len(clusters) - len(first), "a cluster of the earlier run was opened again"
    # Resuming takes the campaign's own target; another one is refused before anything runs.
    base = [sys.executable, "-m", "racefuzz", "run", "--resume", str(folder), "--no-dashboard"]
    other = subprocess.run([*base, "--target", "cpu"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert "it is a campaign on 'testbed:B3'" in other.stderr
    own = subprocess.run(
        [*base, "--seconds", "3", "--no-shrink"], capture_output=True, text=True, timeout=300
    )
    assert own.returncode == 1, own.stderr
    # Its clusters are left unshrunk: both the last line and the summary say what goes on.
    hint = f"racefuzz run --resume {folder} --shrink-only goes on with them"
    assert hint in own.stdout and hint in (folder / "summary.md").read_text().replace("`", "")
    assert json.loads((folder / "findings.json").read_text())["target_spec"] == "testbed:B3"
    # --shrink-only: no fuzzing, every slot on the shrinks the --no-shrink runs left (2 s
    # shrinks: 11 clusters of about 40 s each would double the test; 1 s, on a loaded machine,
    # may go on measuring how often each fails, and leave nothing confirmed).
    shrunk = subprocess.run(
        [
            *base,
            "--shrink-only",
            "--jobs",
            "2",
            "--seconds",
            "240",
            "--shrink-budget",
            "2",
            "--shrink-parallel",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shrunk.returncode == 1, shrunk.stderr
    assert "racefuzz: 0 schedules" in shrunk.stdout, shrunk.stdout
    # The folder's four runs together: the three that fuzzed, and this one.
    totals = json.loads((folder / "findings.json").read_text())["totals"]
    assert totals["runs"] == 4 and totals["schedules"] > 0, totals
    summary = (folder / "summary.md").read_text()
    assert f"- this folder over its 4 runs: {totals['schedules']} schedules in" in summary
    found = json.loads((folder / "findings.json").read_text())["findings"]
    assert {f["cluster"] for f in found} == set(clusters) | {f["cluster"] for f in found}
    assert all(f["bundle"] and "not shrunk" not in f["state"] for f in found), found
    # 2 s shrinks run out of budget before they are 1-minimal, or reproduce too few times to be
    # dependable; another --shrink-only goes on from where each stopped, and keeps every bundle
    # (a miss keeps the one that reproduced). Those it takes up are the clusters that are no
    # other's duplicate: a duplicate's shrink, cut or not, is never taken up again.
    from racefuzz.campaign import store

    left = {r.cluster for r in store.left_to_shrink(store.restore(folder))}
    cut = {f["cluster"]: f for f in found if f["cluster"] in left}
    assert cut, [(f["state"], f["duplicate_of"]) for f in found]
    again = subprocess.run(
        [*base, "--shrink-only", "--jobs", "2", "--seconds", "8", "--shrink-budget", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 1 and again.stdout.count("shrinking ") >= 1, again.stdout
    later = json.loads((folder / "findings.json").read_text())["findings"]
    # Taken up again: a better bundle, or a retry that kept the old one (it found none better;
    # the primaries of many message-duplicates are what is retried, and may not improve).
    now = {f["cluster"]: f for f in later}
    went_on = [
        c
        for c in cut
        if now[c]["bundle"] != cut[c]["bundle"] or "shrinking it again" in now[c]["state"]
    ]
    assert went_on, "no shrink cut short was taken up again"
    # Every bundle folder is some cluster's: one replaced (by a better shrink, or a duplicate's
    # reproducer) is gone.
    on_disk = {p.name for p in folder.iterdir() if p.is_dir()} - {"findings", "corpus"}
    assert on_disk == {f["bundle"] for f in later}, on_disk
    for f in later:
        assert f["bundle"] and (folder / f["bundle"]).is_dir(), f
        before = cut.get(f["cluster"], {}).get("minimal_steps")
        if before is not None and f["minimal_steps"] is not None:
            assert f["minimal_steps"] <= before, f
    alone = subprocess.run(
        [*base[:4], "--shrink-only", "--no-dashboard"], capture_output=True, text=True, timeout=60
    )
    assert alone.returncode == 2 and "it needs --resume DIR" in alone.stderr, alone.stderr
