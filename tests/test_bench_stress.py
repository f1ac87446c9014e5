"""bench.stress: the pools keep Python state valid, findings are racefuzz's, the child runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.stress import MAX_SESSIONS, MAX_VALUES, Pools, finding_of, run_stress
from racefuzz.targets.registry import load_target


def test_pools_never_release_a_session_a_thread_is_running() -> None:
    pools = Pools(("dml", "mgx"), ("tiny",))
    pools.done({"op": "create", "session": "s1", "profile": "dml", "model": "tiny"}, True)
    run = {"op": "run", "session": "s1", "profile": "dml"}
    pools.sessions["s1"].users += 1  # as `pick` claims it for a run
    rng = random.Random(0)
    for _ in range(300):
        step = pools.pick(rng)
        assert step is not None
        assert not (step["op"] == "release" and step["session"] == "s1")
        pools.done(step, ok=False)  # fail creates and allocs: only s1 stays alive
    pools.done(run, ok=True)
    assert pools.sessions["s1"].users == 0


def test_pools_keep_at_most_the_generators_limits_of_sessions_and_values() -> None:
    pools = Pools(("dml", "mgx"), ("tiny", "mlp"))
    rng = random.Random(1)
    ops = set()
    for _ in range(2000):
        step = pools.pick(rng)
        assert step is not None
        ops.add(step["op"])
        pools.done(step, ok=True)
        assert len(pools.sessions) <= MAX_SESSIONS and len(pools.values) <= MAX_VALUES
    assert ops == {"create", "run", "run_bound", "copy", "alloc", "read", "release", "free"}


def test_a_failed_create_leaves_its_name_free_for_the_next_one() -> None:
    pools = Pools(("dml",), ("tiny",))
    pools.done({"op": "create", "session": "s1", "profile": "dml", "model": "tiny"}, ok=False)
    assert pools.sessions == {} and pools._free_name("s", pools.sessions, MAX_SESSIONS) == "s1"


def test_outcomes_become_findings_only_for_errors_and_bad_data() -> None:
    step = {"op": "run", "session": "s1", "profile": "mgx"}
    assert finding_of(step, {"ok": True, "check": "ok"}) is None
    assert finding_of(step, {"ok": True, "detail": "skipped: session s1 was not created"}) is None
    assert finding_of(step, {"ok": True, "check": "zeroed", "detail": "output 0: all zeros"}) == {
        "op": "run",
        "profiles": ["mgx"],
        "kind": "zeroed",
        "message": "output 0: all zeros",
    }
    error = finding_of(step, {"ok": False, "message": "Fail: HIP failure 1: invalid argument"})
    assert error is not None and error["kind"] == "error"


@pytest.mark.slow
def test_stress_on_the_cpu_ep_makes_calls_and_finds_nothing() -> None:
    # Start-up counts against the time: under a CPU hog it took 3.5 s, all of a 3 s stress.
    result = run_stress(load_target("cpu"), seconds=8.0, seed=1, threads=2)
    assert result.seen == () and result.found_s is None
    assert result.ops > 20 and result.runs == 1


def test_stress_stops_at_the_first_finding_its_predicate_accepts(testbed_library: Path) -> None:
    target = load_target("testbed:B6")  # every run of an mgx session fails
    result = run_stress(
        target,
        seconds=30.0,
        seed=1,
        stop=lambda f: f.kind == "error" and f.op == "run" and "mgx" in f.profiles,
    )
    assert result.found_s is not None and result.found_s < 30.0
    assert result.seen[-1].finding.profiles == ("mgx",)
