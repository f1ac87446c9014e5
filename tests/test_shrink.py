"""Tests of the shrinker against pure-Python models of the testbed's bugs.

Each model is a predicate over a schedule that follows the seed's account of when the bug shows
(see `MODELS`); `Fake` turns the predicates into `RunResult`s, optionally flaky, and fails the
test if it is ever handed an ill-formed schedule. The end-to-end shrink against the native EP is
tested elsewhere.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racefuzz.judge.identity import ClusterKey
from racefuzz.judge.oracles import overlap_shape
from racefuzz.judge.outcome import Exit, Finding, RunResult
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule, ScheduleError, Step, problems
from racefuzz.shrink.order import SortKey, sort_key
from racefuzz.shrink.passes import PASSES, merged, normalised, without
from racefuzz.shrink.result import ShrinkEvent, ShrinkResult
from racefuzz.shrink.runs import shown_cluster, shows
from racefuzz.shrink.shrinker import shrink

MODELS_BY_SIZE = ("tiny", "small", "big")
EP_PROFILES = ("dml", "mgx")
LIB = "amdgpu"


def library_of(profile: str) -> str | None:
    return LIB if profile in EP_PROFILES else None  # "cpu" is ORT's own EP


# --- bug models -------------------------------------------------------------------------------
# `slot` is the process-global backend slot: the profile of the last EP `create`.

RUNS = (Op.RUN, Op.RUN_BOUND)


def walk(schedule: Schedule) -> list[tuple[Step, str | None]]:
    """Each step with the profile it works on (its own, or its session's or value's)."""
    return [(s, schedule.step_profile(i)) for i, s in enumerate(schedule.steps)]


def b3_shared_slot(schedule: Schedule) -> bool:
    """B3/B4: a dml session runs while the slot says mgx (a later mgx create overwrote it)."""
    slot = None
    for s, profile in walk(schedule):
        if s.op is Op.CREATE and profile in EP_PROFILES:
            slot = profile
        elif s.op in RUNS and profile == "dml" and slot == "mgx":
            return True
    return False


def b1_latch_once(schedule: Schedule) -> bool:
    """B1: the first run latches its backend; a later run of the other backend misroutes.

    Latching at the first run, not at create, is why the minimum needs `run s1` before `run s2`.
    """
    ran = [profile for s, profile in walk(schedule) if s.op in RUNS and profile in EP_PROFILES]
    return len(set(ran)) > 1


def b7_other_thread(schedule: Schedule) -> bool:
    """B5/B7: an EP session runs on a thread other than the one that created it."""
    created_on: dict[str | None, int] = {}
    for s, profile in walk(schedule):
        if s.op is Op.CREATE:
            created_on[s.session] = s.thread if profile in EP_PROFILES else -1
        elif s.op in RUNS and created_on[s.session] not in (-1, s.thread):
            return True
    return False


def b8_overlapping_creates(schedule: Schedule) -> bool:
    """B8: a dml and an mgx create overlap in one group; the dml session then runs."""
    for start, stop in schedule.groups():
        creates = [s for s in schedule.steps[start:stop] if s.op is Op.CREATE]
        if {s.profile for s in creates} >= set(EP_PROFILES):
            torn = {s.session for s in creates if s.profile == "dml"}
            for s in schedule.steps[stop:]:
                if s.op in RUNS and s.session in torn:
                    return True
                if s.op is Op.CREATE:
                    torn.discard(s.session)
    return False


def r1_env_copy_misroute(schedule: Schedule) -> bool:
    """R1: a value allocated while the slot matched its profile is read after the slot moved."""
    slot = None
    good: set[str | None] = set()
    for s, profile in walk(schedule):
        if s.op is Op.CREATE and profile in EP_PROFILES:
            slot = profile
        elif s.op is Op.ALLOC and profile in EP_PROFILES and slot == profile:
            good.add(s.value)
        elif s.op is Op.READ and s.value in good and slot != profile:
            return True
    return False


def b2_frozen_null(schedule: Schedule) -> bool:
    """B2: every env-level copy to EP memory fails once an EP session exists (the 10D build)."""
    ep_created = False
    for s in schedule.steps:
        ep_created |= s.op is Op.CREATE and s.profile in EP_PROFILES
        if s.op is Op.COPY and s.profile in EP_PROFILES and ep_created:
            return True
    return False


MODELS: dict[str, Callable[[Schedule], bool]] = {
    "B1": b1_latch_once,
    "B2": b2_frozen_null,
    "B3": b3_shared_slot,
    "B7": b7_other_thread,
    "B8": b8_overlapping_creates,
    "R1": r1_env_copy_misroute,
}


def finding(model: str) -> Finding:
    return Finding("error", "run", f"{model}: HIP failure #: invalid argument", ("dml", "mgx"))


def sig(model: str) -> str:
    return finding(model).signature


class Fake:
    """A `run` that fails with each enabled model's signature when its predicate holds, with
    probability `p`; it refuses ill-formed schedules outright."""

    def __init__(
        self,
        *models: str,
        p: float = 1.0,
        seed: int = 0,
        delay: float = 0.0,
        first_run_only: bool = False,  # a schedule fails on its first run and never again
    ) -> None:
        self.models, self.p, self.delay, self.first_run_only = models, p, delay, first_run_only
        self.rng = random.Random(seed)
        self.runs: list[Schedule] = []

    def __call__(self, schedule: Schedule) -> RunResult:
        assert problems(schedule, library_of) == [], f"ran an ill-formed schedule: {schedule}"
        again = schedule in self.runs
        self.runs.append(schedule)
        if self.delay:
            time.sleep(self.delay)
        found = tuple(
            finding(m)
            for m in self.models
            if MODELS[m](schedule)
            and self.rng.random() < self.p
            and not (again and self.first_run_only)
        )
        return RunResult(schedule=schedule, outcomes=(), exit=Exit.CLEAN, findings=found)


# --- schedules --------------------------------------------------------------------------------

Pattern = list[Step | tuple[Step, ...]]  # a tuple is an overlap group, kept together


def reg(thread: int = 0) -> Step:
    return Step(thread, Op.REGISTER, library=LIB)


def create(thread: int, session: str, profile: str, model: str = "big") -> Step:
    return Step(thread, Op.CREATE, session=session, profile=profile, model=model)


def run(thread: int, session: str) -> Step:
    return Step(thread, Op.RUN, session=session)


def alloc(thread: int, value: str, profile: str) -> Step:
    return Step(thread, Op.ALLOC, value=value, profile=profile)


def read(thread: int, value: str) -> Step:
    return Step(thread, Op.READ, value=value)


def copy(thread: int, profile: str) -> Step:
    return Step(thread, Op.COPY, profile=profile)


def noisy(pattern: Pattern, seed: int, sessions: int = 4) -> Schedule:
    """The bug's steps hidden among cpu sessions on 4 threads, with jitter, extra groups and a
    final unregister. The first unit stays first."""
    rng = random.Random(seed)
    units = [u if isinstance(u, tuple) else (u,) for u in pattern]
    blocks: list[list[tuple[Step, ...]]] = [units[1:]]
    for k in range(sessions):
        t = [rng.randrange(4) for _ in range(8)]
        name, value = f"noise{k}", f"buf{k}"
        block = [create(t[0], name, "cpu", rng.choice(MODELS_BY_SIZE))]
        block += [run(t[1 + i], name) for i in range(rng.randint(1, 3))]
        if k % 2:
            block += [alloc(t[4], value, "cpu"), copy(t[5], "cpu"), read(t[6], value)]
            block.append(Step(t[7], Op.FREE, value=value))
        block.append(Step(t[0], Op.RELEASE, session=name))
        blocks.append([(s,) for s in block])
    steps = list(units[0])
    while any(blocks):
        steps += rng.choice([b for b in blocks if b]).pop(0)
    steps.append(Step(rng.randrange(4), Op.UNREGISTER, library=LIB))
    schedule = Schedule(5, tuple(replace(s, jitter_us=rng.choice((0, 0, 50, 400))) for s in steps))
    for gid in range(10, 14):  # a few noise groups over free neighbours that may overlap
        i = rng.randrange(len(steps) - 1)
        a, b = schedule.steps[i : i + 2]
        if a.group is None and b.group is None:
            pair = (replace(a, group=gid), replace(b, group=gid))
            grouped = schedule.with_steps((*schedule.steps[:i], *pair, *schedule.steps[i + 2 :]))
            schedule = schedule if problems(grouped, library_of) else grouped
    assert problems(schedule, library_of) == []
    assert len(schedule.steps) >= 20 and len({s.thread for s in schedule.steps}) >= 3
    return schedule


def minimal(*steps: Step, threads: int = 1) -> Schedule:
    return Schedule(threads, tuple(replace(s, model=s.model and "tiny") for s in steps))


def g(step: Step, group: int) -> Step:
    return replace(step, group=group)


# Each model's bug steps (spread over threads, odd names, big models) and its known minimum.
CASES: dict[str, tuple[Pattern, Schedule]] = {
    "B3": (
        [reg(1), create(2, "a", "dml"), create(0, "b", "mgx"), run(3, "a")],
        minimal(reg(), create(0, "s1", "dml"), create(0, "s2", "mgx"), run(0, "s1")),
    ),
    "B1": (
        [reg(3), create(1, "m", "mgx"), run(2, "m"), create(0, "d", "dml"), run(1, "d")],
        minimal(reg(), create(0, "s1", "mgx"), run(0, "s1"), create(0, "s2", "dml"), run(0, "s2")),
    ),
    "B7": (
        [reg(3), create(2, "x", "mgx"), run(1, "x")],
        minimal(reg(), create(0, "s1", "mgx"), run(1, "s1"), threads=2),
    ),
    "B8": (
        [reg(2), (g(create(3, "d", "dml"), 1), g(create(1, "m", "mgx"), 1)), run(0, "d")],
        minimal(
            reg(),
            g(create(0, "s1", "dml"), 1),
            g(create(1, "s2", "mgx"), 1),
            run(0, "s1"),
            threads=2,
        ),
    ),
    "R1": (
        [reg(1), create(0, "d", "dml"), alloc(2, "x", "dml"), create(3, "m", "mgx"), read(1, "x")],
        minimal(
            reg(),
            create(0, "s1", "dml"),
            alloc(0, "v1", "dml"),
            create(0, "s2", "mgx"),
            read(0, "v1"),
        ),
    ),
    "B2": (
        [reg(2), create(1, "d", "dml"), copy(3, "dml")],
        minimal(reg(), create(0, "s1", "dml"), copy(0, "dml")),
    ),
}


def is_one_minimal(schedule: Schedule, fails: Callable[[Schedule], bool]) -> bool:
    for i in range(len(schedule.steps)):
        smaller = without(schedule, [i], library_of)
        if smaller is not None and fails(smaller):
            return False
    return True


def do_shrink(
    schedule: Schedule, model: str, fake: Callable[[Schedule], RunResult], **kw: Any
) -> ShrinkResult:
    return shrink(
        schedule, sig(model), fake, models_by_size=MODELS_BY_SIZE, library_of=library_of, **kw
    )


# --- the bug models reach their known minimal schedules ---------------------------------------


@pytest.mark.parametrize("model", list(CASES))
def test_each_bug_model_shrinks_from_a_noisy_schedule_to_its_known_minimum(model: str) -> None:
    pattern, expected = CASES[model]
    original = noisy(pattern, seed=sum(map(ord, model)))
    assert MODELS[model](original) and MODELS[model](expected)
    fake = Fake(model)
    result = do_shrink(original, model, fake)
    assert result.final == expected
    assert result.stopped == "done"
    assert result.one_minimal and is_one_minimal(result.final, MODELS[model])
    assert result.reproduction == (20, 20)
    assert result.last_failure is not None and result.last_failure.schedule == expected
    assert result.calls == len(fake.runs)


def test_merging_the_two_threads_of_b7_loses_the_failure_so_two_threads_stay() -> None:
    pattern, expected = CASES["B7"]
    fake = Fake("B7")
    result = do_shrink(noisy(pattern, seed=3), "B7", fake)
    assert result.final == expected
    one_thread = merged(expected, 0, 1)
    assert one_thread in fake.runs and not b7_other_thread(one_thread)


def test_shrink_keeps_the_signature_when_a_smaller_schedule_fails_another_way() -> None:
    b3, b3_minimal = CASES["B3"]
    # B2's minimum (3 steps) hides inside: it fails, but with B2's signature, not B3's.
    both: Pattern = [*b3, Step(2, Op.COPY, profile="dml")]
    fake = Fake("B2", "B3")
    result = do_shrink(noisy(both, seed=11), "B3", fake)
    assert result.final == b3_minimal
    assert any(b2_frozen_null(s) and not b3_shared_slot(s) for s in fake.runs)
    assert do_shrink(noisy(both, seed=11), "B2", Fake("B2", "B3")).final == CASES["B2"][1]


@pytest.mark.parametrize("model", ["B3", "B8", "R1"])
def test_flaky_failures_still_shrink_to_the_minimum_with_need_of_replays(model: str) -> None:
    pattern, expected = CASES[model]
    # Half the runs of a failing schedule show the bug; 1 of 5, checked twice, rarely misses.
    fake = Fake(model, p=0.5, seed=1)
    result = do_shrink(noisy(pattern, seed=5), model, fake, replays=5, recheck=(1, 5))
    assert result.final == expected
    assert result.one_minimal
    k, n = result.reproduction
    assert n == 20 and 3 <= k <= 17


@pytest.mark.slow
def test_a_rare_failure_gets_checks_sized_to_its_rate_and_still_reaches_the_minimum() -> None:
    # One run in 8 shows the bug (webgpu's "Device is lost" is about that rare). A 1-of-3 check
    # misses such a cut 2 times in 3, so the default checks keep few cuts and end early.
    sized, fixed = [], []
    for model in ("B3", "B8", "R1"):
        pattern, expected = CASES[model]
        for seed in range(1, 4):
            result = do_shrink(noisy(pattern, seed=5), model, Fake(model, p=0.125, seed=seed))
            assert result.measured[1] == 20 and result.check[1] >= 10  # sized to the rate
            sized.append(result.final == expected)
            old = do_shrink(
                noisy(pattern, seed=5), model, Fake(model, p=0.125, seed=seed), max_replays=3
            )
            fixed.append(old.final == expected)
    assert sum(sized) >= 7 and sum(fixed) <= 2, (sized, fixed)


def test_a_budget_sized_in_runs_stretches_with_the_checks_of_a_rare_failure() -> None:
    pattern, _ = CASES["B3"]

    def rare(**kw: Any) -> ShrinkResult:
        fake = Fake("B3", p=0.125, seed=1)
        return do_shrink(noisy(pattern, seed=5), "B3", fake, budget_s=100.0, **kw)

    stretched, given = rare(stretch_budget=True), rare()
    assert stretched.check == given.check == (1, 10)
    assert stretched.budget_s == pytest.approx(100.0 * 10 / 3)
    assert given.budget_s == pytest.approx(100.0)  # a budget the user gave is kept
    frequent = do_shrink(noisy(pattern, seed=5), "B3", Fake("B3"), budget_s=100.0)
    assert frequent.check == (1, 3) and frequent.budget_s == pytest.approx(100.0)
    # Inside a campaign that still fuzzes, one shrink takes at most its share of the time.
    capped = rare(stretch_budget=True, budget_cap_s=150.0)
    assert capped.check == (1, 10) and capped.budget_s == pytest.approx(150.0)
    assert do_shrink(
        noisy(pattern, seed=5), "B3", Fake("B3"), budget_s=100.0, budget_cap_s=40.0
    ).budget_s == pytest.approx(40.0)


def test_a_campaign_shrink_takes_a_quarter_of_the_campaign_and_at_least_half_a_minute() -> None:
    from racefuzz.shrink.result import campaign_cap

    assert campaign_cap(300) == 75.0
    assert campaign_cap(60) == 30.0
    assert campaign_cap(3600) == 900.0


@pytest.mark.slow
def test_a_failure_seen_once_counts_only_when_need_is_one_and_there_is_no_recheck() -> None:
    pattern, expected = CASES["B3"]
    original = noisy(pattern, seed=5)

    def shrink_first_run_only(**kw: Any) -> tuple[ShrinkResult, set[int]]:
        """Shrink with a bug that shows on a schedule's first run only; also return how many
        runs each tested candidate took."""
        events: list[ShrinkEvent] = []
        fake = Fake("B3", first_run_only=True)
        result = do_shrink(original, "B3", fake, confirm_replays=0, on_progress=events.append, **kw)
        tested = [e for e in events if e.phase != "check"]
        runs = {b.calls - a.calls for a, b in pairwise(tested) if b.candidates > a.candidates}
        return result, runs

    assert shrink_first_run_only(need=1, recheck=(0, 0))[0].final == expected
    assert shrink_first_run_only(need=1, recheck=(1, 3))[0].final == original
    # (At its fixed replays: sized to the rate, 1 in 3 here, the check would take 9 or 10.)
    result, runs = shrink_first_run_only(need=2, replays=3, recheck=(0, 0), max_replays=3)
    assert result.final == original
    # Runs stop once the answer is known: 2 when the bug does not show, 3 when it showed once.
    assert runs == {2, 3}


# --- well-formedness, budget, progress --------------------------------------------------------


def test_ill_formed_candidates_are_never_run_even_with_re_created_names() -> None:
    release, unregister = Step(0, Op.RELEASE, session="a"), Step(0, Op.UNREGISTER, library=LIB)
    steps = [reg(0), create(1, "a", "dml"), run(2, "a"), release, create(1, "a", "mgx")]
    steps += [alloc(2, "x", "dml"), unregister, reg(1), create(2, "b", "dml")]
    steps += [create(0, "c", "mgx"), read(1, "x"), run(2, "b")]
    original = Schedule(threads=3, steps=tuple(steps))
    fake = Fake("B3")  # asserts well-formedness of everything it is handed
    result = do_shrink(original, "B3", fake)
    assert result.final == CASES["B3"][1]


def test_best_path_always_holds_a_well_formed_schedule(tmp_path: Path) -> None:
    best = tmp_path / "best.json"
    seen: list[int] = []

    def check(event: ShrinkEvent) -> None:
        on_disk = load(best)
        assert problems(on_disk, library_of) == []
        assert len(on_disk.steps) == event.steps
        seen.append(event.steps)

    pattern, expected = CASES["R1"]
    result = do_shrink(noisy(pattern, seed=7), "R1", Fake("R1"), best_path=best, on_progress=check)
    assert load(best) == result.final == expected
    assert seen[0] > seen[-1] == len(expected.steps)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.json", "best.signature"]


def test_the_time_budget_is_respected() -> None:
    pattern, _ = CASES["B1"]
    fake = Fake("B1", delay=0.01)
    t0 = time.monotonic()
    result = do_shrink(noisy(pattern, seed=9, sessions=8), "B1", fake, budget_s=0.6)
    elapsed = time.monotonic() - t0
    assert result.stopped == "budget" and not result.one_minimal
    assert elapsed < 0.6 + 0.4  # one run in flight and scheduling noise on a busy machine
    # The search left room for the 20 replays at its mean run time so far; on a loaded machine
    # later runs take longer than that mean, and the deadline cuts the last few (seen with a
    # CPU hog beside the suite: 18 of 20).
    assert result.reproduction[1] >= 10 and b1_latch_once(result.final)
    assert problems(result.final, library_of) == []


def test_a_schedule_that_never_fails_again_is_returned_as_it_was() -> None:
    original = noisy(CASES["B3"][0], seed=1)
    result = do_shrink(original, "B3", Fake())
    assert result.final == original
    assert result.stopped == "not reproduced"
    assert result.reproduction == (0, 20) and result.calls == 20
    assert result.last_failure is None and not result.one_minimal


def test_the_stall_budget_ends_the_search_but_one_minimality_is_still_checked() -> None:
    pattern, _ = CASES["R1"]
    result = do_shrink(noisy(pattern, seed=4), "R1", Fake("R1"), max_stall=3)
    assert result.stopped == "stall"
    assert result.one_minimal and is_one_minimal(result.final, r1_env_copy_misroute)


def test_progress_events_and_pass_counters_account_for_every_run() -> None:
    events: list[ShrinkEvent] = []
    pattern, _ = CASES["B8"]
    fake = Fake("B8")
    result = do_shrink(noisy(pattern, seed=2), "B8", fake, on_progress=events.append)
    assert [p.name for p in result.passes] == ["blame"] + [p.__name__ for p in PASSES] + ["verify"]
    kept = sum(p.shrinks for p in result.passes)
    assert kept == sum(e.improved for e in events) > 0
    assert result.candidates == sum(p.candidates for p in result.passes)
    # Every run outside the passes measures the original (3 runs: all failed, so the default
    # checks suit it) or is a final replay.
    assert result.measured == (3, 3) and result.check == (1, 3)
    assert len(fake.runs) == sum(p.calls for p in result.passes) + 3 + 20
    assert {e.phase for e in events} >= {"check", "drop_threads", "normalise", "reproduce"}
    assert events[-1].calls == result.calls


def test_an_ill_formed_schedule_is_refused() -> None:
    bad = Schedule(threads=1, steps=(run(0, "s1"),))
    with pytest.raises(
        ScheduleError,
        match=r"^cannot shrink an ill-formed schedule: step 0: 'run' of session 's1' "
        r"before its 'create'$",
    ):
        shrink(bad, sig("B3"), Fake("B3"))


def test_impossible_replay_counts_are_refused() -> None:
    good = CASES["B3"][1]
    with pytest.raises(ValueError, match=r"^need must be within 1\.\.replays, not 4 of 3$"):
        shrink(good, sig("B3"), Fake("B3"), need=4, replays=3)


# --- the pieces -------------------------------------------------------------------------------


def test_sort_key_ranks_steps_then_threads_then_groups_then_jitter_then_models_then_names() -> None:
    base = CASES["B3"][1]

    def key(s: Schedule) -> SortKey:
        return sort_key(s, MODELS_BY_SIZE)

    two_threads = replace(
        base, threads=2, steps=(*base.steps[:3], replace(base.steps[3], thread=1))
    )
    grouped = base.with_steps(
        (
            base.steps[0],
            replace(base.steps[1], group=1),
            replace(base.steps[2], group=1),
            base.steps[3],
        )
    )
    jittered = base.with_steps((*base.steps[:3], replace(base.steps[3], jitter_us=5)))
    big = base.with_steps((base.steps[0], replace(base.steps[1], model="big"), *base.steps[2:]))
    renamed = base.with_steps(replace(s, session=s.session and "z" + s.session) for s in base.steps)
    longer = base.with_steps((*base.steps, run(0, "s2")))
    order = [base, renamed, big, jittered, grouped, two_threads, longer]
    assert sorted(order, key=key) == order
    assert key(normalised(renamed)) == key(base)


def test_deleting_a_create_takes_its_sessions_steps_but_not_a_later_life_of_the_name() -> None:
    release = Step(0, Op.RELEASE, session="a")
    steps = (reg(), create(0, "a", "dml"), run(0, "a"), release, create(0, "a", "mgx"), run(0, "a"))
    assert without(Schedule(1, steps), [1], library_of) == Schedule(1, (reg(), *steps[4:]))


def test_deleting_a_register_takes_what_needs_it_and_an_alloc_its_value() -> None:
    unregister = Step(0, Op.UNREGISTER, library=LIB)
    steps: tuple[Step, ...] = (reg(), create(0, "c", "cpu"), create(0, "a", "dml"))
    steps += (alloc(0, "x", "dml"), read(0, "x"), unregister, run(0, "c"))
    assert without(Schedule(1, steps), [0], library_of) == Schedule(1, (steps[1], steps[6]))
    assert without(Schedule(1, steps), [3], library_of) == Schedule(1, steps[:3] + steps[5:])


@settings(max_examples=200, deadline=None)
@given(
    model=st.sampled_from(sorted(CASES)),
    seed=st.integers(0, 10**6),
    cut=st.sets(st.integers(0, 40), max_size=6),
)
def test_deleting_any_steps_leaves_a_well_formed_schedule_or_none(
    model: str, seed: int, cut: set[int]
) -> None:
    original = noisy(CASES[model][0], seed)
    smaller = without(original, cut, library_of)
    if smaller is not None:
        assert problems(smaller, library_of) == []
        assert len(smaller.steps) < len(original.steps)


@settings(max_examples=100, deadline=None)
@given(model=st.sampled_from(sorted(CASES)), seed=st.integers(0, 10**6))
def test_normalising_keeps_well_formedness_and_never_ranks_higher(model: str, seed: int) -> None:
    original = noisy(CASES[model][0], seed)
    once = normalised(original)
    assert problems(once, library_of) == []
    assert normalised(once) == once
    assert sort_key(once, MODELS_BY_SIZE) <= sort_key(original, MODELS_BY_SIZE)


# --- overlap clusters: bystanders in a racing group are cut -----------------------------------


def create_run_race(schedule: Schedule) -> RunResult:
    """A webgpu-like race: any overlap group holding a create and a run of a created session
    crashes; the finding carries the group's shape, as the oracle gives it."""
    found: tuple[Finding, ...] = ()
    for start, stop in schedule.groups():
        ops = {s.op for s in schedule.steps[start:stop]}
        if {Op.CREATE, Op.RUN} <= ops:
            shape = overlap_shape(schedule, start)
            found = (Finding("crash", "create+run", "SIGSEGV", ("dml",), overlap=shape),)
    return RunResult(schedule=schedule, outcomes=(), exit=Exit.CLEAN, findings=found)


def test_an_overlap_cluster_shrinks_past_its_bystanders_to_the_race_itself() -> None:
    bystander = minimal(
        reg(),
        create(0, "s1", "dml"),
        g(create(1, "s2", "mgx"), 1),
        g(alloc(2, "v1", "dml"), 1),
        g(run(0, "s1"), 1),
        threads=3,
    )
    (first,) = create_run_race(bystander).findings
    assert first.cluster == "overlap|copy+create+run"
    result = shrink(bystander, first.cluster, create_run_race, library_of=library_of)
    assert result.final == minimal(
        reg(), create(0, "s1", "dml"), g(create(0, "s2", "mgx"), 1), g(run(1, "s1"), 1), threads=2
    )
    (last,) = create_run_race(result.final).findings
    assert last.cluster == "overlap|create+run" and result.confirmed


def test_what_an_overlap_cluster_shrink_accepts() -> None:
    def f(shape: str, misuse: str = "") -> Finding:
        return Finding("crash", "run", "SIGSEGV", ("dml",), overlap=shape, misuse=misuse)

    assert shows("overlap|copy+create+run", f("create+run"))
    assert shows("overlap|create+run", f("create+run"))
    assert not shows("overlap|create+run", f("copy+create+run"))  # more parties: another race
    assert not shows("overlap|create+run", f(""))  # no overlap at all: the order alone broke it
    assert not shows("overlap|create+run", f("create+run", misuse="unregister mid-run"))
    assert shows("misuse|overlap|create+run", f("run", misuse="unregister mid-run"))
    # A symptom's cluster (it failed with no overlap, or fails alone) takes it after any overlap.
    assert shows("crash|SIGSEGV|run", f("run")) and shows("crash|SIGSEGV|run", f(""))
    assert not shows("crash|SIGSEGV|run", f("run", misuse="unregister mid-run"))
    assert not shows("misuse|overlap|create+run", f("run"))  # an EP bug is not the misuse
    # Pinned to its symptom, an overlap cluster takes only that failure after the overlap: the
    # webgpu shrink that took a placement error failing alone drifted onto another cluster.
    misplaced = Finding("misplaced", "run", "output N", ("dml",), overlap="create+run")
    assert shows("overlap|create+run", misplaced)
    assert not shows("overlap|create+run", misplaced, "crash|SIGSEGV|run")
    assert shows("overlap|create+run", f("create+run"), "crash|SIGSEGV|run")
    assert shows("overlap|create+run", f("run"), "crash|SIGSEGV|run")  # fewer parties
    # A bundle of a blamed earlier group is written under that group's shape.
    shape = ClusterKey.parse("misuse|overlap|create+run").shape
    assert shape == ClusterKey.parse("overlap|create+run").shape == {"create", "run"}
    assert ClusterKey.parse("crash|SIGSEGV|run").shape == frozenset()
    assert ClusterKey.parse("error|run|a|b").message == "a|b"  # a message may hold a bar


# --- replays at once (a GPU race may need the load) -------------------------------------------


def test_a_shrink_with_parallel_replays_runs_them_at_once_and_counts_each() -> None:
    pattern, expected = CASES["B8"]
    fake = Fake("B8", p=0.5, seed=3)
    lock, running, most = threading.Lock(), [0], [0]

    def run(schedule: Schedule) -> RunResult:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            with lock:  # the Fake's random stream is not thread-safe
                result = fake(schedule)
            time.sleep(0.005)
            return result
        finally:
            with lock:
                running[0] -= 1

    result = do_shrink(noisy(pattern, seed=8), "B8", run, parallel=4)
    assert normalised(result.final) == expected
    assert most[0] == 4, "replays were not run at once"
    assert result.calls == len(fake.runs)
    k, n = result.reproduction
    assert n == 20 and 0 < k < 20  # every replay counted, batches of 4 included


def test_a_cluster_shrunk_to_another_race_names_it_whichever_symptom_its_last_replay_had() -> None:
    encoder = "WebGPU validation failed. CommandEncoder is already finished."
    error = Finding("error", "run", encoder, ("webgpu",), step=4, overlap="run")
    crash = Finding("crash", "run", "SIGSEGV", ("webgpu",), step=4, overlap="run")
    wanted, symptom = "overlap|run+terminate", error.symptom
    # Its own symptom after the narrower overlap: the run-run race's cluster.
    assert shown_cluster(wanted, symptom, [error]) == "overlap|run"
    # Another symptom of that race (counted by RaceSymptoms): still the race's cluster.
    assert shown_cluster(wanted, symptom, [crash]) == "overlap|run"
    # A failure with no overlap before it is no race's.
    assert shown_cluster(wanted, symptom, [replace(crash, overlap="")]) is None
    assert shown_cluster(wanted, symptom, []) is None
