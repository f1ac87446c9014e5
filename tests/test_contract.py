"""ORT's API contract: what counts as misuse, that generation keeps to it by default, and that
findings after a breach are labelled misuse (never an EP bug)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from racefuzz import strategies
from racefuzz.judge.oracles import judge
from racefuzz.judge.outcome import Exit, RunResult, StepOutcome
from racefuzz.schedule import contract
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.strategies.space import Space, space_for

LIB = {"dml": "amd", "mgx": "amd", "cpu": None}.get


def sched(*steps: Step) -> Schedule:
    return Schedule(2, steps)


REG = Step(0, Op.REGISTER)
CREATE = Step(0, Op.CREATE, session="s1", profile="dml", model="mlp")
UNREG = Step(1, Op.UNREGISTER)


def test_unregister_while_a_session_of_the_library_is_alive_is_a_breach() -> None:
    (b,) = contract.breaches(sched(REG, CREATE, UNREG), LIB)
    assert b.step == 2 and "session s1 (dml)" in b.rule


def test_unregister_after_the_release_is_legal_and_ort_own_eps_are_not_touched() -> None:
    release = Step(0, Op.RELEASE, session="s1")
    assert contract.is_legal(sched(REG, CREATE, release, UNREG), LIB)
    cpu = Step(0, Op.CREATE, session="s2", profile="cpu", model="mlp")
    assert contract.is_legal(sched(REG, cpu, UNREG), LIB)


def test_a_kept_device_value_counts_like_a_session() -> None:
    alloc = Step(0, Op.ALLOC, value="v1", profile="mgx")
    free = Step(0, Op.FREE, value="v1")
    (b,) = contract.breaches(sched(REG, CREATE, Step(0, Op.RELEASE, session="s1"), alloc, UNREG))
    assert "value v1" in b.rule
    assert contract.is_legal(sched(REG, alloc, free, UNREG), LIB)


def test_a_release_overlapping_the_unregister_may_come_after_it() -> None:
    release = Step(0, Op.RELEASE, session="s1", group=1)
    grouped = sched(REG, CREATE, release, replace(UNREG, group=1))
    assert [b.step for b in contract.breaches(grouped, LIB)] == [3]


def test_the_one_real_nxrt_crash_we_knew_is_api_misuse() -> None:
    from pathlib import Path

    from racefuzz.schedule.json_io import load

    wild = Path(__file__).parent.parent / "schedules" / "misuse"
    found = [load(p) for p in sorted(wild.glob("*.json"))]
    assert found and all(contract.breaches(s) for s in found)


SPACE = Space(profiles=("dml", "mgx"), models=("mlp",), max_steps=16, max_threads=3)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["random", "pct", "swarm", "portfolio"])
def test_default_generation_never_breaks_the_contract(strategy: str) -> None:
    unregisters = 0
    for seed in (3, 4):  # two seeds: one seed's count swings with every op the table gains
        gen = strategies.make(strategy, SPACE, seed)
        for _ in range(400):
            s = gen.next_schedule()
            assert s is not None
            assert not contract.breaches(s, SPACE.library_for), s
            unregisters += any(step.op is Op.UNREGISTER for step in s.steps)
    assert unregisters > 20  # the lifecycle is still exercised, legally


def test_allow_misuse_generates_breaches() -> None:
    gen = strategies.make("random", replace(SPACE, allow_misuse=True), 3)
    schedules = [gen.next_schedule() for _ in range(400)]
    assert sum(bool(s and contract.breaches(s, SPACE.library_for)) for s in schedules) > 10


def test_nxrt_cpu_campaign_space_is_legal_by_default() -> None:
    from racefuzz.targets.registry import load_target

    space = space_for(load_target("nxrt-cpu"), 24, 4)
    gen = strategies.make("portfolio", space, 11)
    for _ in range(300):
        s = gen.next_schedule()
        assert s is not None and not space.breaches(s)


def test_findings_after_a_breach_are_misuse_and_those_before_are_not() -> None:
    run = Step(0, Op.RUN, session="s1")
    s = sched(REG, CREATE, run, UNREG, run)
    outcomes = (
        StepOutcome(2, False, "RuntimeError: before"),
        StepOutcome(4, False, "RuntimeError: after"),
    )
    before, after = judge(RunResult(s, outcomes, Exit.CLEAN), LIB).findings
    assert before.misuse == "" and before.cluster.startswith("error|")
    assert "step 3: unregister" in after.misuse and after.cluster.startswith("misuse|")
    crash = judge(RunResult(s, (), Exit.CRASH, returncode=-11, signal="SIGSEGV", in_flight=(5,)))
    assert crash.findings[0].misuse
