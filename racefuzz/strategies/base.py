"""The strategy protocol, and the state model every generator builds schedules with.

A strategy hands out schedules (`next_schedule`, None when it has no more) and may learn from
what running them did (`observe`). Every generator here works the same way: it keeps a `State`,
the model of what a schedule prefix leaves behind (registered libraries, live sessions and
values, whether any session was created, which thread did what), asks `enabled_steps` what may
come next on a thread, and appends. Because a step is only appended when `State.allows` it, and
`allows` is at least as strict as `racefuzz.schedule.problems`, generated schedules are
well-formed by construction; `finish` asserts it once more.

An overlap group is checked against the state at the group's start as well as in list order:
steps released together behind a barrier may run in any order, so none may depend on another
(no `run` of a session created in the same group, no `copy` beside the first `create`).

It is also at least as strict as `problems` without the target's library map, which is what
`loads()` checks: an op of ORT's own EP still waits for some library to be registered, so that
every generated schedule survives a JSON round trip.

`repair` (keep what still fits) and `behaviour` (coarse features of a run, to tell a run that
did something new) serve the mutator and the portfolio. This module does not choose *which*
step to take (that is each strategy's business) and it does not run anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from racefuzz import contract
from racefuzz.outcome import RunResult
from racefuzz.schedule import (
    MAX_JITTER_US,
    NEEDS_EARLIER_CREATE,
    NEEDS_REGISTRATION,
    SESSION_OPS,
    VALUE_OPS,
    Op,
    Schedule,
    Step,
)
from racefuzz.strategies.space import Space

JITTER_RATE = 0.04  # share of steps that get a sleep: rare, or it drowns the races it shakes
MAX_GENERATED_JITTER_US = 2000
SMALLEST_MODEL_BIAS = 0.7  # creates use the smallest model this often (faster, same bugs)

# How often a random step is of each kind, before what is enabled narrows the choice. Creates and
# runs dominate because every seeded bug needs sessions of two profiles and runs after them.
OP_WEIGHTS: dict[Op, float] = {
    Op.REGISTER: 2.0,
    Op.UNREGISTER: 0.3,
    Op.CREATE: 3.0,
    Op.RUN: 3.0,
    Op.RUN_BOUND: 1.2,
    Op.RELEASE: 0.9,
    Op.COPY: 1.0,
    Op.ALLOC: 1.2,
    Op.READ: 1.5,
    Op.FREE: 0.4,
}


class Strategy(Protocol):
    """Hands out schedules; the same construction seed makes the same sequence."""

    name: str

    def next_schedule(self) -> Schedule | None:
        """The next schedule to run, or None when this strategy has nothing more."""
        ...

    def observe(self, result: RunResult) -> None:
        """Learn from a run of some schedule (not necessarily one of ours)."""
        ...


@dataclass
class Live:
    """A live session or device value: its profile and the thread that made it."""

    profile: str
    thread: int


@dataclass
class State:
    """What a schedule prefix leaves behind. `allows` before `apply`; never apply blindly."""

    threads: int
    steps: list[Step] = field(default_factory=list)
    registered: set[str] = field(default_factory=set)  # registration keys, "*" = unnamed
    ever_registered: set[str] = field(default_factory=set)
    sessions: dict[str, Live] = field(default_factory=dict)  # alive only
    values: dict[str, Live] = field(default_factory=dict)  # alive only
    created_any: bool = False
    history: list[list[int]] = field(default_factory=list)  # per thread: its indices into steps
    names: set[str] = field(default_factory=set)  # every session/value name used so far
    groups_used: set[int] = field(default_factory=set)
    # The state when the trailing overlap group began; None when the last step is not grouped.
    group_base: State | None = None

    def __post_init__(self) -> None:
        while len(self.history) < self.threads:
            self.history.append([])

    def copy(self) -> State:
        return State(
            threads=self.threads,
            steps=list(self.steps),
            registered=set(self.registered),
            ever_registered=set(self.ever_registered),
            sessions=dict(self.sessions),
            values=dict(self.values),
            created_any=self.created_any,
            history=[list(h) for h in self.history],
            names=set(self.names),
            groups_used=set(self.groups_used),
            group_base=self.group_base,
        )

    # --- queries ---------------------------------------------------------------------------

    def is_registered_for(self, profile: str, space: Space) -> bool:
        key = space.library_for(profile)
        if key is None:
            # ORT's own EPs need no library, but `loads()` checks without the target's map, and
            # there an op that needs registration needs *some* library registered.
            return bool(self.registered)
        return key in self.registered or "*" in self.registered

    def current_group(self) -> int | None:
        return self.steps[-1].group if self.steps else None

    def group_threads(self) -> set[int]:
        """Threads of the trailing overlap group's steps."""
        g, out = self.current_group(), set()
        for s in reversed(self.steps):
            if g is None or s.group != g:
                break
            out.add(s.thread)
        return out

    def fresh(self, prefix: str) -> str:
        """The next unused name `s1`, `s2`, ... (or `v1`, ...)."""
        k = 1
        while f"{prefix}{k}" in self.names:
            k += 1
        return f"{prefix}{k}"

    def next_group_id(self) -> int:
        return max(self.groups_used, default=0) + 1

    def allows(self, step: Step, space: Space) -> bool:
        """Whether appending `step` keeps the schedule well-formed and inside `space`."""
        if not 0 <= step.thread < self.threads or not 0 <= step.jitter_us <= MAX_JITTER_US:
            return False
        if step.group is not None:
            if step.group == self.current_group():
                if step.thread in self.group_threads():
                    return False
                assert self.group_base is not None
                if not self.group_base.allows(replace(step, group=None), space):
                    return False
                if self._lifecycle_clash(step):
                    return False
            elif step.group in self.groups_used:
                return False
        return self._allows_op(step, space)

    def _lifecycle_clash(self, step: Step) -> bool:
        """A library is not (un)registered while a step of the same group relies on it.

        Stricter than `problems()` (any library, not just the one needed): simple and enough.
        """
        g = self.current_group()
        members = [s for s in reversed(self.steps) if s.group == g]
        ops = {s.op for s in members} | {step.op}
        return bool(ops & {Op.REGISTER, Op.UNREGISTER}) and bool(ops & NEEDS_REGISTRATION)

    def _allows_op(self, step: Step, space: Space) -> bool:
        op = step.op
        if op is Op.REGISTER or op is Op.UNREGISTER:
            key = step.library or "*"
            if key not in space.library_keys():
                return False
            if op is Op.UNREGISTER:
                return (
                    key in self.registered
                    and space.lifecycle
                    and Op.UNREGISTER in space.ops
                    and (space.allow_misuse or not self._uses(key, space))
                )
            again = key in self.ever_registered
            if again and not (space.lifecycle and Op.REGISTER in space.ops):
                return False
            return key not in self.registered and "*" not in self.registered
        if op not in space.ops:
            return False
        if op in SESSION_OPS or op in VALUE_OPS:
            live = self._live(step)
            if live is None:
                return False
            profile = live.profile
        elif step.profile in space.profiles:
            profile = step.profile
        else:
            return False
        if op is Op.CREATE and (
            step.model not in space.models or step.session is None or step.session in self.sessions
        ):
            return False
        if op is Op.ALLOC and (step.value is None or step.value in self.values):
            return False
        if op in NEEDS_EARLIER_CREATE and not self.created_any:
            return False
        # Which ops need their library registered is schedule.py's call, not ours.
        return op not in NEEDS_REGISTRATION or self.is_registered_for(profile, space)

    def _uses(self, key: str, space: Space) -> bool:
        """Whether a live session or value needs registration `key` (ORT's contract forbids
        unregistering it then: `racefuzz.contract`)."""
        lives = (*self.sessions.values(), *self.values.values())
        return any(contract.needs(key, space.library_for(live.profile)) for live in lives)

    def _live(self, step: Step) -> Live | None:
        """The live session or value a step names, if it is alive."""
        if step.op in SESSION_OPS:
            return self.sessions.get(step.session or "")
        return self.values.get(step.value or "")

    # --- update ----------------------------------------------------------------------------

    def apply(self, step: Step) -> None:
        if step.group is None:
            self.group_base = None
        elif step.group != self.current_group():
            self.group_base = self.copy()
            self.group_base.group_base = None
            self.groups_used.add(step.group)
        self.history[step.thread].append(len(self.steps))
        self.steps.append(step)
        key = step.library or "*"
        if step.op is Op.REGISTER:
            self.registered.add(key)
            self.ever_registered.add(key)
        elif step.op is Op.UNREGISTER:
            self.registered.discard(key)
        elif step.op is Op.CREATE:
            assert step.session is not None and step.profile is not None
            self.sessions[step.session] = Live(step.profile, step.thread)
            self.names.add(step.session)
            self.created_any = True
        elif step.op is Op.RELEASE:
            self.sessions.pop(step.session or "", None)
        elif step.op is Op.ALLOC:
            assert step.value is not None and step.profile is not None
            self.values[step.value] = Live(step.profile, step.thread)
            self.names.add(step.value)
        elif step.op is Op.FREE:
            self.values.pop(step.value or "", None)


def enabled_steps(
    state: State, thread: int, space: Space, rng: random.Random | None = None
) -> list[Step]:
    """Every well-formed next step on `thread`, ungrouped and without jitter.

    With `rng`, each create proposes one model (the smallest, usually) instead of all of them,
    so that profiles and not models set the odds.
    """
    out: list[Step] = []
    for key in space.library_keys():
        lib = None if key == "*" else key
        for op in (Op.REGISTER, Op.UNREGISTER):
            out.append(Step(thread, op, library=lib))
    if len(state.sessions) < space.max_sessions:
        name = state.fresh("s")
        for p in space.profiles:
            models: Sequence[str] = space.models
            if rng is not None:
                small = len(models) == 1 or rng.random() < SMALLEST_MODEL_BIAS
                models = [models[0] if small else rng.choice(models[1:])]
            out.extend(Step(thread, Op.CREATE, session=name, profile=p, model=m) for m in models)
    for s in sorted(state.sessions):
        out.extend(Step(thread, op, session=s) for op in (Op.RUN, Op.RUN_BOUND, Op.RELEASE))
    out.extend(Step(thread, Op.COPY, profile=p) for p in space.profiles)
    if len(state.values) < space.max_values:
        name = state.fresh("v")
        out.extend(Step(thread, Op.ALLOC, value=name, profile=p) for p in space.profiles)
    for v in sorted(state.values):
        out.extend(Step(thread, op, value=v) for op in (Op.READ, Op.FREE))
    return [s for s in out if state.allows(s, space)]


def pick(
    candidates: Sequence[Step], rng: random.Random, weights: dict[Op, float] | None = None
) -> Step:
    """A weighted draw: first an op kind by weight, then uniformly among its candidates."""
    table = OP_WEIGHTS if weights is None else weights
    by_op: dict[Op, list[Step]] = {}
    for s in candidates:
        by_op.setdefault(s.op, []).append(s)
    kinds = sorted(by_op)
    op = rng.choices(kinds, weights=[table.get(k, 1.0) for k in kinds])[0]
    return rng.choice(by_op[op])


def with_jitter(step: Step, space: Space, rng: random.Random) -> Step:
    """Rarely, a short sleep before the step (recorded, so it replays)."""
    if space.jitter and rng.random() < JITTER_RATE:
        return replace(step, jitter_us=rng.randint(1, MAX_GENERATED_JITTER_US))
    return step


def choose_threads(space: Space, rng: random.Random) -> int:
    """How many threads a new schedule gets: mostly several, since races need two."""
    if space.max_threads == 1 or rng.random() < 0.1:
        return 1
    return rng.randint(2, space.max_threads)


def repair(steps: Iterable[Step], threads: int, space: Space) -> list[Step]:
    """Keep the steps that fit, in order; a group that no longer fits is dropped, not its steps.

    Dropping a `create` drops its session's later steps with it (they no longer fit either).
    """
    state = State(threads)
    for s in steps:
        if s.group is not None and not state.allows(s, space):
            s = replace(s, group=None)
        if state.allows(s, space):
            state.apply(s)
    return normalise_groups(state.steps)


def normalise_groups(steps: Sequence[Step]) -> list[Step]:
    """Drop one-step groups and number the rest 1, 2, ... in order of appearance."""
    out = list(steps)
    ids: dict[int, int] = {}
    for i, s in enumerate(steps):
        if s.group is None:
            continue
        alone = (i == 0 or steps[i - 1].group != s.group) and (
            i + 1 == len(steps) or steps[i + 1].group != s.group
        )
        group = None if alone else ids.setdefault(s.group, len(ids) + 1)
        out[i] = replace(s, group=group)
    return out


def finish(
    steps: Sequence[Step], threads: int, space: Space, name: str = "", description: str = ""
) -> Schedule:
    """The schedule for generated steps, asserted well-formed (a failure is a racefuzz bug)."""
    schedule = Schedule(threads, tuple(normalise_groups(steps)), name, description)
    found = space.problems(schedule)
    assert not found, f"generated an ill-formed schedule: {found[0]}"
    return schedule


_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def behaviour(result: RunResult) -> set[str]:
    """Coarse features of what a run did, to tell a run that was new in some way."""
    out = {f"exit:{result.exit}"}
    ops = [s.op for s in result.schedule.steps]
    for o in result.outcomes:
        op = ops[o.step] if 0 <= o.step < len(ops) else "?"
        message = _DIGITS.sub("N", o.message)[:120]
        out.add(f"{op}:{o.ok}:{o.check}:{message}")
    out.update(f"finding:{f.signature}" for f in result.findings)
    return out
