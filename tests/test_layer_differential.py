"""The layer never changes what the EP computes: the same generated schedules, run with and
without it, give every step the same outcome (data checked against ORT's CPU EP, errors word
for word), on the fixed testbed and on a real CPU plugin EP (nxrt-cpu)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from racefuzz import strategies
from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.op_table import LAYER_OPS
from racefuzz.strategies.space import space_for
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow

SCHEDULES = 25


def outcomes(result: RunResult) -> list[tuple[int, bool, str | None, str, str]]:
    return [(o.step, o.ok, o.check, o.message, o.skipped) for o in result.outcomes]


@pytest.mark.parametrize("name", ["testbed", "nxrt-cpu"])
def test_the_same_schedules_give_the_same_outcomes_with_and_without_the_layer(
    name: str, testbed_library: Path
) -> None:
    plain_target, layered_target = load_target(name), load_target(f"{name}[layer]")
    # No overlap groups or jitter: the comparison is of what the EP computes, not of timing.
    space = space_for(plain_target, 14, 3, lifecycle=False)
    space = replace(space, groups=False, jitter=False, ops=space.ops - LAYER_OPS)
    generate = strategies.make("random", space, seed=11)
    plain, layered = Runner(plain_target, zygote=False), Runner(layered_target, zygote=False)
    compared = 0
    for _ in range(SCHEDULES):
        schedule = generate.next_schedule()
        assert schedule is not None
        a, b = plain.run(schedule), layered.run(schedule)
        assert outcomes(a) == outcomes(b), schedule
        compared += sum(1 for o in a.outcomes if o.check is not None)
    assert compared >= SCHEDULES  # data was checked, not only errors compared
