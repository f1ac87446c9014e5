"""The layer and the testbed's white-box trace, side by side on the fixed testbed: every run in
which the trace saw memory served by a backend that does not own it (R1), the layer, looking
only at what crosses the ABI, said so too. Generated schedules, both reports in one run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from racefuzz import strategies
from racefuzz.execute.runner import Runner
from racefuzz.strategies.space import space_for
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow

SCHEDULES = 60


def test_every_misroute_the_trace_sees_the_layer_sees(testbed_library: Path) -> None:
    layered = load_target("testbed[layer]")
    both = replace(layered, trace=True)  # the testbed's trace and the layer's report
    runner = Runner(both)
    launcher = runner.launcher()
    generate = strategies.make("random", space_for(both, 16, 3, lifecycle=False), seed=3)
    seen = missed = 0
    try:
        for _ in range(SCHEDULES):
            schedule = generate.next_schedule()
            assert schedule is not None
            result = runner.run(schedule, launcher)
            traced = [f for f in result.findings if f.kind == "misroute"]
            abi = [f for f in result.findings if f.kind == "abi"]
            seen += bool(traced)
            missed += bool(traced) and not abi
            assert all(f.message.startswith(("misroute: ", "shared-object: ")) for f in abi), abi
    finally:
        if launcher is not None:
            launcher.close()
    assert seen >= 3, f"only {seen} of {SCHEDULES} schedules misrouted: too few to compare"
    assert missed == 0, f"the layer missed {missed} of the {seen} runs the trace saw misrouted"


def test_a_campaign_behind_the_layer_finds_r1_by_its_owners(
    testbed_library: Path, tmp_path: Path
) -> None:
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [
            *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed[layer]"),
            *("--seconds", "20", "--no-corpus", "--no-shrink", "--no-dashboard", "--jobs", "1"),
            *("--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    found = json.loads((folder / "findings.json").read_text())["findings"]
    assert not [f for f in found if f["kind"] == "misroute"]  # the testbed's trace is off
    r1 = [
        f
        for f in found
        if f["kind"] == "abi" and "profile=dml" in f["message"] and "profile=mgx" in f["message"]
    ]
    assert r1 and min(f["first_seen_s"] for f in r1) < 20, [f["cluster"] for f in found]
