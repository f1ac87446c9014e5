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
