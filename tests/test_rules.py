"""Tests of racefuzz/schedule/rules.py: the one rule checker behind `problems()`, ORT's contract
and generation.

Unit tests of `Checker` first. Then properties: `problems()` and `contract.breaches` keep the
semantics they had before the checker (the reference below walks a whole schedule the way they
did, rule by rule and group by group), on generated schedules and on mutants of them; and what
`State.allows` lets a generator build has no problem at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racefuzz.schedule import contract
from racefuzz.schedule.contract_rules import needs
from racefuzz.schedule.model import MAX_JITTER_US, Op, Schedule, Step, make_step, problems
from racefuzz.schedule.op_table import LIVE_KINDS, NAME_FIELDS, SPECS, Effect, Subject, maker
from racefuzz.schedule.rules import (
    RULE_SETS,
    Checker,
    Problem,
    Rules,
    RuleSet,
    check_schedule,
)
from racefuzz.strategies import make
from racefuzz.strategies.base import State, enabled_steps
from racefuzz.strategies.hypothesis_schedules import schedules, spaces
from racefuzz.strategies.mutate import MUTATIONS
from racefuzz.strategies.space import Space

LibraryOf = Callable[[str], str | None] | None
EXAMPLE = Space(profiles=("dml", "mgx"), models=("mlp",))
LIB = {"dml": "a", "mgx": "b", "cpu": None}.get
REG = Step(0, Op.REGISTER)
GENERATORS = ("random", "pct", "swarm")


def create(thread: int, session: str, profile: str = "dml", group: int | None = None) -> Step:
    return Step(thread, Op.CREATE, session=session, profile=profile, model="mlp", group=group)


def run(thread: int, session: str, group: int | None = None) -> Step:
    return Step(thread, Op.RUN, session=session, group=group)


# --- the checker ------------------------------------------------------------------------------


def test_push_returns_what_a_step_adds_and_check_changes_nothing() -> None:
    checker = Checker(2)
    assert checker.push(REG) == []
    (p,) = checker.check(run(1, "s1"))
    assert p == Problem(1, "unknown-session", "step 1: 'run' of session 's1' before its 'create'")
    assert str(p) == p.text and p.detail == "'run' of session 's1' before its 'create'"
    assert checker.check(run(1, "s1")) == [p] and not checker.accepts(run(1, "s1"))
    assert checker.push(create(0, "s1")) == [] and checker.accepts(run(1, "s1"))
    assert checker.found == [] and checker.finish() == []
    assert checker.push(create(1, "s1"))[0].rule == "alive-session"
    assert [q.step for q in checker.found] == [2]


def test_a_copy_walks_on_alone() -> None:
    checker = Checker(1)
    for s in (REG, create(0, "s1")):
        checker.push(s)
    other = checker.copy()
    other.push(Step(0, Op.RELEASE, session="s1"))
    assert checker.accepts(run(0, "s1")) and not other.accepts(run(0, "s1"))
    assert set(checker.alive(Subject.SESSION)) == {"s1"} and not other.alive(Subject.SESSION)


def test_one_walk_answers_under_any_rule_set() -> None:
    checker = Checker(2)
    for s in (REG, create(0, "s1")):
        checker.record(s)
    unregister = Step(1, Op.UNREGISTER)
    assert checker.check(unregister) == []  # well-formed...
    assert checker.check(unregister, RuleSet(Rules.CONTRACT, LIB)) == [  # ...but misuse
        Problem(
            2,
            "unregister-in-use",
            "step 2: unregister of every library while session s1 (dml) alive",
        )
    ]
    assert checker.check(unregister, RuleSet(Rules.CONTRACT, {"dml": None}.get)) == []
    with pytest.raises(ValueError):
        RuleSet(Rules.GENERATOR)


def test_the_schedule_problems_come_first_and_each_group_after_every_steps_own() -> None:
    assert Checker(0).found == [Problem(None, "threads", "threads must be at least 1, not 0")]
    steps = (
        REG,
        create(0, "s1", group=1),
        run(1, "s1", 1),
        run(0, "s1", 1),
        Step(0, Op.FREE, value="v"),
    )
    found = check_schedule(Schedule(2, steps))
    # Found in step order; the group's thread clash, found at step 3, is reported at its start.
    assert [(p.step, p.rule) for p in found] == [
        (4, "unknown-value"),
        (1, "group-thread"),
        (2, "overlap-name"),
        (3, "overlap-name"),
    ]
    assert [str(p) for p in found] == problems(Schedule(2, steps))


def test_a_later_unregister_flags_the_step_of_its_group_that_needs_the_library() -> None:
    checker = Checker(4, RuleSet(Rules.WELL_FORMED, LIB))
    checker.push(Step(0, Op.REGISTER, library="a"))
    checker.push(create(0, "s1", group=1))
    assert checker.push(Step(1, Op.REGISTER, library="b", group=1)) == []  # not dml's library
    # Steps of a group run in any order: the create may come after the unregister.
    text = "step 1: 'create' overlaps a register/unregister it needs in group 1"
    assert checker.push(Step(2, Op.UNREGISTER, library="a", group=1)) == [
        Problem(1, "overlap-lifecycle", text)
    ]
    assert [p.rule for p in checker.push(create(3, "s2", "mgx", group=1))] == ["overlap-lifecycle"]
    assert [p.step for p in checker.found] == [1, 4]  # each once


def test_the_generators_rules_add_what_the_space_and_loads_need() -> None:
    cpu = Space(profiles=("cpu",), models=("mlp",), library_of={"cpu": None})
    checker = Checker(2)
    no_map = RuleSet(Rules.WELL_FORMED, cpu.library_for)
    assert checker.check(create(0, "s1", "cpu"), no_map) == []  # ORT's own EP needs no library...
    rules = [p.rule for p in checker.check(create(0, "s1", "cpu"), cpu.generator_rules())]
    assert rules == ["needs-any-library"]  # ...but `loads()` checks without the target's map
    for s in (REG, create(0, "s1")):
        checker.record(s)
    rules = [p.rule for p in checker.check(Step(0, Op.READ, value="v"), EXAMPLE.generator_rules())]
    assert rules == ["unknown-value"]
    narrow = replace(EXAMPLE, ops=frozenset({Op.REGISTER, Op.CREATE}), lifecycle=False)
    assert [p.rule for p in checker.check(run(1, "s1"), narrow.generator_rules())] == [
        "op-not-offered"
    ]
    checker.record(Step(0, Op.RELEASE, session="s1"))
    checker.record(Step(0, Op.UNREGISTER))
    assert [p.rule for p in checker.check(REG, narrow.generator_rules())] == ["register-again"]
    checker.record(replace(REG, group=3))
    # Beside the register, a create would need the library that is only being registered.
    grouped = [p.rule for p in checker.check(create(1, "s2", group=3), EXAMPLE.generator_rules())]
    assert grouped == ["overlap-lifecycle", "group-start", "group-lifecycle"]


def test_every_rule_belongs_to_one_set_and_needs_reads_star_as_every_library() -> None:
    assert set(RULE_SETS.values()) == {Rules.WELL_FORMED, Rules.CONTRACT, Rules.GENERATOR}
    assert needs("*", "a") and needs("a", "a") and needs("a", "*") and not needs("a", "b")
    assert not needs("*", None)


# --- properties -------------------------------------------------------------------------------


def _reference_problems(schedule: Schedule, library_of: LibraryOf) -> list[str]:
    """`problems()` as it was: every step's problems in order, then every group's."""
    out = [] if schedule.threads >= 1 else [f"threads must be at least 1, not {schedule.threads}"]
    registered: set[str] = set()
    alive: dict[Subject, set[str]] = {kind: set() for kind in LIVE_KINDS}
    created_any = False
    for i, s in enumerate(schedule.steps):
        where, spec, key = f"step {i}", SPECS[s.op], s.library or "*"
        if not 0 <= s.thread < schedule.threads:
            out.append(f"{where}: thread {s.thread} is outside 0..{schedule.threads - 1}")
        if not 0 <= s.jitter_us <= MAX_JITTER_US:
            out.append(f"{where}: jitter_us must be within 0..{MAX_JITTER_US}")
        for name in NAME_FIELDS:
            has = getattr(s, name) is not None
            if has and name not in spec.fields:
                out.append(f"{where}: '{s.op}' takes no '{name}'")
            elif not has and name in spec.required:
                out.append(f"{where}: '{s.op}' needs a '{name}'")
        if s.mode is not None and spec.modes and s.mode not in spec.modes:
            out.append(f"{where}: '{s.op}' has no mode '{s.mode}' (one of {', '.join(spec.modes)})")
        if s.op is Op.REGISTER:
            if key in registered or "*" in registered:
                out.append(f"{where}: 'register' of {key} while it is registered")
            registered.add(key)
        elif s.op is Op.UNREGISTER:
            if key not in registered and "*" not in registered:
                out.append(f"{where}: 'unregister' of {key} while it is not registered")
            registered = set() if key == "*" else registered - {key}
        for profile in schedule.step_profiles(i) if spec.needs_registration else []:
            lib = library_of(profile) if library_of and profile else "?"
            ok = bool(registered) if lib == "?" else lib is None or bool({"*", lib} & registered)
            if not ok:
                out.append(
                    f"{where}: '{s.op}' while the EP library of '{profile}' is not registered"
                )
        if spec.needs_earlier_create and not created_any:
            out.append(f"{where}: '{s.op}' before any 'create' (no backend chosen yet)")
        for kind, name, made in s.names():
            if made and name in alive[kind]:
                out.append(f"{where}: '{s.op}' of {kind} '{name}' that is alive")
            elif not made and name not in alive[kind]:
                out.append(f"{where}: '{s.op}' of {kind} '{name}' before its '{maker(kind).op}'")
            if made:
                alive[kind].add(name)
        if spec.effect is Effect.ENDS and spec.subject in LIVE_KINDS:
            alive[spec.subject].discard(getattr(s, spec.subject.value) or "")
        created_any = created_any or (s.op is Op.CREATE and s.session is not None)
    seen: set[int] = set()
    for start, stop in schedule.groups():
        out += _reference_group(schedule, start, stop, library_of, seen)
    return out


def _reference_group(
    schedule: Schedule, start: int, stop: int, library_of: LibraryOf, seen: set[int]
) -> list[str]:
    steps, out = schedule.steps, []
    g = steps[start].group
    assert g is not None
    if g in seen:
        out.append(f"step {start}: group {g} is not one consecutive run of steps")
    seen.add(g)
    threads = [s.thread for s in steps[start:stop]]
    if len(set(threads)) != len(threads):
        out.append(f"step {start}: group {g} has two steps on one thread")
    first_create = next((i for i, s in enumerate(steps) if s.op is Op.CREATE), None)
    named: dict[tuple[str, str], tuple[int, Op, bool]] = {}
    lifecycle = [
        s.library or "*" for s in steps[start:stop] if SPECS[s.op].subject is Subject.LIBRARY
    ]
    for k in range(start, stop):
        s, spec = steps[k], SPECS[steps[k].op]
        names = [(str(kind), n, m) for kind, n, m in s.names()]
        if spec.subject is Subject.LIBRARY:
            names.append(("library", s.library or "*", spec.effect is Effect.MAKES))
        for kind, name, makes in names:
            j, op, made = named.setdefault((kind, name), (k, s.op, makes))
            if j != k and (made or makes):
                out.append(
                    f"step {k}: '{s.op}' of {kind} '{name}' overlaps step {j} ('{op}') in group {g}"
                )
        if spec.needs_earlier_create and first_create is not None and start <= first_create < k:
            out.append(f"step {k}: '{s.op}' overlaps the first 'create' in group {g}")
        libs = [library_of(p) for p in schedule.step_profiles(k) if library_of and p]
        if (
            spec.needs_registration
            and lifecycle
            and any(
                lib is not None and bool({"*", lib} & set(lifecycle) or lib == "*") for lib in libs
            )
        ):
            out.append(f"step {k}: '{s.op}' overlaps a register/unregister it needs in group {g}")
    return out


def _reference_breaches(schedule: Schedule, library_of: LibraryOf) -> list[contract.Breach]:
    """`contract.breaches` as it was."""
    alive: dict[tuple[str, str], str] = {}
    at_start: dict[tuple[str, str], str] = {}
    out = []
    for i, s in enumerate(schedule.steps):
        if s.group is not None and (i == 0 or schedule.steps[i - 1].group != s.group):
            at_start = dict(alive)
        spec = SPECS[s.op]
        subject = getattr(s, spec.subject.value) if spec.subject in LIVE_KINDS else None
        if subject and spec.effect is Effect.MAKES and (on := schedule.step_profile(i)):
            alive[(spec.subject.value, subject)] = on
        elif subject and spec.effect is Effect.ENDS:
            alive.pop((spec.subject.value, subject), None)
        elif spec.subject is Subject.LIBRARY and spec.effect is Effect.ENDS:
            key = s.library or "*"
            pool = alive | at_start if s.group is not None else alive
            users = [
                f"{kind} {name} ({profile})"
                for (kind, name), profile in pool.items()
                if needs(key, library_of(profile) if library_of else "*")
            ]
            if users:
                what = "every library" if key == "*" else key
                out.append(
                    contract.Breach(i, f"unregister of {what} while {', '.join(users)} alive")
                )
    return out


def _edit(steps: list[Step], threads: int, space: Space, rng: random.Random) -> list[Step]:
    """One random edit of a step's fields, thread, group or place, or a library, session or value
    ended anywhere: mostly ill-formed, or outside ORT's contract."""
    if not steps:
        return steps
    i, out = rng.randrange(len(steps)), list(steps)
    choice = rng.randrange(7)
    if choice == 6:
        op = rng.choice([Op.REGISTER, Op.UNREGISTER, Op.RELEASE, Op.FREE])
        library = rng.choice([None, *space.libraries])
        ended = make_step(op, rng.randrange(threads), library=library, session="s1", value="v1")
        out.insert(i, replace(ended, group=rng.choice([None, out[i].group])))
    elif choice == 0:
        out[i] = replace(out[i], group=rng.choice([None, 1, 2]))
    elif choice == 1:
        out[i] = replace(out[i], thread=rng.randrange(-1, threads + 1))
    elif choice == 2:
        out[i] = replace(out[i], op=rng.choice(list(Op)))
    elif choice == 3:
        name = rng.choice(NAME_FIELDS)
        values = [None, "s1", "s2", "v1", "x", *space.profiles, *space.models, *space.libraries]
        edit: dict[str, Any] = {name: rng.choice(values)}
        out[i] = replace(out[i], **edit)
    elif choice == 4:
        out[i] = replace(out[i], jitter_us=rng.choice([-1, 0, 7, MAX_JITTER_US + 1]))
    else:
        j = min(len(out), i + rng.randint(2, 3))
        out[i:j] = [replace(s, group=3) for s in out[i:j]]
    return out


@st.composite
def mutants(draw: st.DrawFn) -> tuple[Space, Schedule]:
    """A generated schedule (Hypothesis' or a seeded strategy's), then some of the mutator's raw
    mutations and field edits."""
    space = replace(draw(spaces()), allow_misuse=draw(st.booleans()))
    rng = draw(st.randoms(use_true_random=False))
    schedule = draw(schedules(space)) if draw(st.booleans()) else None
    if schedule is None:
        schedule = make(
            draw(st.sampled_from(GENERATORS)), space, rng.randrange(2**32)
        ).next_schedule()
    assert schedule is not None
    steps, threads = list(schedule.steps), schedule.threads
    for _ in range(draw(st.integers(1, 8))):
        if rng.random() < 0.5:
            mutated = rng.choice(MUTATIONS)[1](steps, threads, space, rng)
            steps, threads = mutated if mutated is not None else (steps, threads)
        else:
            steps = _edit(steps, threads, space, rng)
    return space, Schedule(threads if rng.random() < 0.95 else 0, tuple(steps))


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_problems_and_breaches_keep_their_semantics(drawn: tuple[Space, Schedule]) -> None:
    space, schedule = drawn
    for library_of in (None, space.library_for):
        assert problems(schedule, library_of) == _reference_problems(schedule, library_of)
        # The reference knows the unregister rule only; later rules have tests of their own.
        found = [b for b in contract.breaches(schedule, library_of) if b.rule.startswith("unreg")]
        assert found == _reference_breaches(schedule, library_of)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(), st.booleans(), st.randoms(use_true_random=False))
def test_whatever_state_allows_has_no_problem(
    space: Space, misuse: bool, rng: random.Random
) -> None:
    space = replace(space, allow_misuse=misuse)
    threads = rng.randint(1, space.max_threads)
    state = State(threads)
    for _ in range(rng.randint(1, 30)):
        t = rng.randrange(threads)
        # Enabled steps, and edits of them that are mostly not allowed: `allows` decides.
        proposed = enabled_steps(state, t, space) or [Step(t, Op.REGISTER)]
        candidates = [*proposed, *_edit(proposed, threads, space, rng)]
        candidates += [
            replace(s, group=rng.choice([state.current_group(), 1, 2])) for s in proposed
        ]
        allowed = [s for s in candidates if state.allows(s, space)]
        if allowed:
            state.apply(rng.choice(allowed))
    schedule = Schedule(threads, tuple(state.steps))
    sets = Rules.WELL_FORMED if space.allow_misuse else Rules.WELL_FORMED | Rules.CONTRACT
    assert check_schedule(schedule, RuleSet(sets, space.library_for)) == []
    assert problems(schedule) == []  # what `loads()` checks, without the target's map
