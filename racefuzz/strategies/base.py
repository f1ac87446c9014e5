"""The strategy protocol, and the state model every generator builds schedules with.

A strategy hands out schedules (`next_schedule`, None when it has no more) and may learn from
what running them did (`observe`). Every generator here works the same way: it keeps a `State`,
the model of what a schedule prefix leaves behind (registered libraries, live sessions and
values, whether any session was created, which thread did what), asks `enabled_steps` what may
come next on a thread, and appends. A step is only appended when `State.allows` it, and `allows`
is the one rule checker (`racefuzz.schedule.rules`) with all its sets: well-formedness (what
`racefuzz.schedule.model.problems` reports), ORT's contract unless the space allows misuse, and
the generator's own strictness. So generated schedules are well-formed by construction; `finish`
asserts it once more.

The generator's rules check an overlap group against the state at the group's start as well as
in list order: steps released together behind a barrier may run in any order, so none may
depend on another (no `run` of a session created in the same group, no `copy` beside the first
`create`). They also hold schedules to `problems` without the target's library map, which is
what `loads()` checks: an op of ORT's own EP still waits for some library to be registered, so
that every generated schedule survives a JSON round trip.

`repair` (keep what still fits) and `behaviour` (coarse features of a run, to tell a run that
did something new) serve the mutator and the portfolio. This module does not choose *which*
step to take (that is each strategy's business) and it does not run anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Protocol

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.schedule.op_table import LIVE_KINDS, PREFIX, SPECS, Effect, OpSpec, Subject
from racefuzz.schedule.rules import Checker, RuleSet
from racefuzz.strategies.space import Space

JITTER_RATE = 0.04  # share of steps that get a sleep: rare, or it drowns the races it shakes
MAX_GENERATED_JITTER_US = 2000
# Runs that size a dynamic model's dims, and the sizes: small, odd, and a few past the sizes at
# which kernels often switch paths (vector widths, tiles).
DIMS_RATE = 0.4
DIM_SIZES = (1, 2, 3, 7, 16, 33, 64, 257)
SMALLEST_MODEL_BIAS = 0.7  # creates use the smallest model this often (faster, same bugs)

# How often a random step is of each kind, before what is enabled narrows the choice.
OP_WEIGHTS: dict[Op, float] = {op: spec.weight for op, spec in SPECS.items()}


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
class State:
    """What a schedule prefix leaves behind. `allows` before `apply`; never apply blindly."""

    threads: int
    steps: list[Step] = field(default_factory=list)
    history: list[list[int]] = field(default_factory=list)  # per thread: its indices into steps
    names: set[str] = field(default_factory=set)  # every session/value name used so far
    groups_used: set[int] = field(default_factory=set)
    # The rules' model of the prefix (libraries, live names, overlap groups): it depends on the
    # steps alone, so the space's rule set is only needed when asking.
    checker: Checker = field(init=False, compare=False)
    # The rule set of the space last asked about (built once, not for every candidate).
    _rules: tuple[Space, RuleSet] | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        while len(self.history) < self.threads:
            self.history.append([])
        self.checker = Checker(self.threads)

    def copy(self) -> State:
        out = State(
            threads=self.threads,
            steps=list(self.steps),
            history=[list(h) for h in self.history],
            names=set(self.names),
            groups_used=set(self.groups_used),
        )
        out.checker, out._rules = self.checker.copy(), self._rules
        return out

    # --- queries ---------------------------------------------------------------------------

    def current_group(self) -> int | None:
        return self.steps[-1].group if self.steps else None

    def fresh(self, prefix: str) -> str:
        """The next unused name `s1`, `s2`, ... (or `v1`, ...)."""
        k = 1
        while f"{prefix}{k}" in self.names:
            k += 1
        return f"{prefix}{k}"

    def next_group_id(self) -> int:
        return max(self.groups_used, default=0) + 1

    def allows(self, step: Step, space: Space) -> bool:
        """Whether appending `step` keeps the schedule well-formed, inside `space` and (unless
        it allows misuse) inside ORT's contract: every rule set of `racefuzz.schedule.rules`."""
        if self._rules is None or self._rules[0] is not space:
            self._rules = (space, space.generator_rules())
        return self.checker.accepts(step, self._rules[1])

    def alive(self, kind: Subject) -> AbstractSet[str]:
        """The live sessions or values."""
        return self.checker.alive(kind)

    # --- update ----------------------------------------------------------------------------

    def apply(self, step: Step) -> None:
        if step.group is not None and step.group != self.current_group():
            self.groups_used.add(step.group)
        self.checker.record(step)
        self.history[step.thread].append(len(self.steps))
        self.steps.append(step)
        spec = SPECS[step.op]
        if spec.subject in LIVE_KINDS and spec.effect is Effect.MAKES:
            name = getattr(step, spec.subject.value)
            assert name is not None
            self.names.add(name)


# Where `enabled_steps` looks for candidates, in order: each subject in `Subject`'s order, all
# its ops (None), or for sessions and values their makers (True), then users and enders (False).
_SOURCES = [(k, m) for k in Subject for m in ((True, False) if k in LIVE_KINDS else (None,))]


def enabled_steps(
    state: State, thread: int, space: Space, rng: random.Random | None = None
) -> list[Step]:
    """Every well-formed next step on `thread`, ungrouped and without jitter.

    Proposed from the op table (see `racefuzz.schedule.op_table`): library ops per registration key,
    makers per profile under a fresh name, users and enders per live subject or per profile,
    each per live peer and allowed mode. With `rng`, each create proposes one model (the
    smallest, usually) instead of all of them, so that profiles and not models set the odds.
    """
    return [s for s in _proposals(state, thread, space, rng) if state.allows(s, space)]


def pick_enabled(state: State, thread: int, space: Space, rng: random.Random) -> Step | None:
    """`pick(enabled_steps(...))` in distribution, checking candidates against the rules only
    until one passes (None: none does). Checking every candidate was nearly all the cost of
    drawing a schedule (about 13 ms of 14, measured), and drawing is what limits one campaign
    process (`bench/results/ray.md`).

    `pick` draws an op kind by weight among the kinds with an enabled step, then a step of it
    by mode weight. Here a kind is drawn among those left and dropped if none of its steps
    passes (rejection: the kinds that have one keep their relative odds), and its steps are
    drawn by weight without replacement until one passes (the first that passes is drawn
    with the odds it has among those that pass)."""
    by_op: dict[Op, list[Step]] = {}
    for s in _proposals(state, thread, space, rng):
        by_op.setdefault(s.op, []).append(s)
    while by_op:
        kinds = sorted(by_op)
        op = rng.choices(kinds, weights=[OP_WEIGHTS.get(k, 1.0) for k in kinds])[0]
        steps = by_op.pop(op)
        weights = [SPECS[op].mode_weight(s.mode) for s in steps]
        while steps:
            i = rng.choices(range(len(steps)), weights=weights)[0]
            step = steps.pop(i)
            del weights[i]
            if state.allows(step, space):
                return step
    return None


def _proposals(state: State, thread: int, space: Space, rng: random.Random | None) -> list[Step]:
    """Every next step on `thread` the op table proposes, before the rules are asked."""
    out: list[Step] = []
    for subject, makers in _SOURCES:
        specs = [
            s
            for s in SPECS.values()
            if s.subject is subject and makers in (None, s.effect is Effect.MAKES)
        ]
        for names in _subjects(subject, makers, specs, state, space, rng):
            for spec in specs:
                peers = sorted(state.alive(spec.peer)) if spec.peer is not None else [None]
                out.extend(
                    make_step(spec.op, thread, **names, peer=peer, mode=mode)
                    for peer in peers
                    for mode in spec.mode_choices
                )
    return out


def _subjects(
    subject: Subject,
    makers: bool | None,
    specs: Sequence[OpSpec[Op]],
    state: State,
    space: Space,
    rng: random.Random | None,
) -> list[dict[str, str | None]]:
    """The name fields of each proposal from one source (see `_SOURCES`)."""
    if subject is Subject.LIBRARY:
        return [{"library": None if key == "*" else key} for key in space.library_keys()]
    if subject is Subject.PROFILE:
        return [{"profile": p} for p in space.profiles]
    alive = state.alive(subject)
    if not makers:
        return [{subject.value: name} for name in sorted(alive)]
    limit = space.max_sessions if subject is Subject.SESSION else space.max_values
    if len(alive) >= limit:
        return []
    name = state.fresh(PREFIX[subject])
    out: list[dict[str, str | None]] = []
    for p in space.profiles:
        models: Sequence[str | None] = [None]
        if any("model" in s.fields for s in specs):
            models = space.models
            if rng is not None:
                small = len(models) == 1 or rng.random() < SMALLEST_MODEL_BIAS
                models = [models[0] if small else rng.choice(space.models[1:])]
        out.extend({subject.value: name, "profile": p, "model": m} for m in models)
    return out


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
    spec = SPECS[op]
    if not spec.mode_weights:
        return rng.choice(by_op[op])
    return rng.choices(by_op[op], weights=[spec.mode_weight(s.mode) for s in by_op[op]])[0]


def with_jitter(step: Step, space: Space, rng: random.Random) -> Step:
    """Rarely, a short sleep before the step (recorded, so it replays); and, where the space's
    models have symbolic dims, often sizes for them on a step that feeds a session."""
    if space.jitter and rng.random() < JITTER_RATE:
        step = replace(step, jitter_us=rng.randint(1, MAX_GENERATED_JITTER_US))
    if space.dims and SPECS[step.op].sized and rng.random() < DIMS_RATE:
        step = replace(step, dims=tuple(rng.choice(DIM_SIZES) for _ in range(2)))
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
