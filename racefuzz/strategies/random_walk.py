"""Random well-formed schedules: a walk over what `enabled_steps` allows next.

Each schedule gets a random thread count and length. It starts with a `register` on a random
thread; then each step goes to a random thread and is a weighted draw among the steps enabled
there (op kinds by `OP_WEIGHTS`, uniform within a kind). Now and then the walk lays down an overlap
group instead of one step: a few steps on distinct threads released together, most often creates
of different profiles (concurrent construction, B8) or a create beside runs and copies. On a target
with the EP-ABI layer it also lays down held windows (`held_window`): a run parked at a scheduling
point while other threads work.

The walk is the baseline the other strategies are measured against, and the engine under swarm
testing, PCT's programs and the mutator's fallback. It does not learn from results.
"""

from __future__ import annotations

import random
from dataclasses import replace

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.schedule.op_table import SPECS, Effect, Subject
from racefuzz.strategies.base import (
    State,
    choose_threads,
    enabled_steps,
    finish,
    pick,
    pick_enabled,
    with_jitter,
)
from racefuzz.strategies.held_window import HOLD_RATE, propose_held_window
from racefuzz.strategies.space import Space

GROUP_RATE = 0.12  # chance, before each step, of laying down an overlap group instead
# Work beside a create in a group: whatever is neither the backbone nor an end of something.
_WORK = frozenset(
    op
    for op, spec in SPECS.items()
    if spec.subject is not Subject.LIBRARY
    and spec.effect is not Effect.ENDS
    and op is not Op.CREATE
)


class RandomWalk:
    """Uniform random well-formed schedules; the same seed makes the same ones."""

    name = "random"

    def __init__(self, space: Space, seed: int, *, group_rate: float = GROUP_RATE) -> None:
        self.space = space
        self.group_rate = group_rate
        self._rng = random.Random(seed)

    def next_schedule(self) -> Schedule:
        return walk(self.space, self._rng, group_rate=self.group_rate)

    def observe(self, result: RunResult) -> None:
        pass


def first_register(space: Space, threads: int, rng: random.Random) -> Step:
    """The opening `register`, of a library some profile needs, on a random thread."""
    needed = sorted({k for p in space.profiles if (k := space.library_for(p)) is not None})
    key = rng.choice(needed or list(space.library_keys()))
    return Step(rng.randrange(threads), Op.REGISTER, library=None if key == "*" else key)


def walk(
    space: Space,
    rng: random.Random,
    *,
    threads: int | None = None,
    length: int | None = None,
    group_rate: float = GROUP_RATE,
) -> Schedule:
    """One random well-formed schedule of about `length` steps (random when None)."""
    n = threads or choose_threads(space, rng)
    if length is None:
        length = rng.randint(min(4, space.max_steps), space.max_steps)
    state = State(n)
    state.apply(with_jitter(first_register(space, n, rng), space, rng))
    while len(state.steps) < length:
        if Op.HOLD in space.ops and rng.random() < HOLD_RATE:
            window = propose_held_window(state, space, rng, room=length - len(state.steps))
            for s in window:
                state.apply(s)
            if window:
                continue
        if space.groups and n > 1 and rng.random() < group_rate:
            group = propose_group(state, space, rng, room=length - len(state.steps))
            if group:
                for s in group:
                    state.apply(s)
                continue
        step = pick_enabled(state, rng.randrange(n), space, rng)
        if step is None:
            break  # every thread sees the same state: nothing is enabled anywhere
        state.apply(with_jitter(step, space, rng))
    return finish(state.steps, n, space)


def propose_group(state: State, space: Space, rng: random.Random, room: int) -> list[Step]:
    """Two or three steps on distinct threads that may overlap; [] when none fit.

    Biased by theme: creates of distinct profiles (B8 needs concurrent construction), a create
    beside work on live sessions and memory (B3/B4/R1 windows), or anything enabled.
    """
    k = min(room, state.threads, 2 if state.threads == 2 or rng.random() < 0.7 else 3)
    if k < 2:
        return []
    trial = state.copy()
    gid = trial.next_group_id()
    theme = rng.random()
    out: list[Step] = []
    for i, t in enumerate(rng.sample(range(state.threads), k)):
        candidates = [
            s
            for c in enabled_steps(trial, t, space, rng)
            if trial.allows(s := replace(c, group=gid), space)
        ]
        if not candidates:
            break
        used = {s.profile for s in out if s.op is Op.CREATE}
        beside = [s for s in candidates if out and _beside(s, out[0])]
        if beside and rng.random() < 0.5:
            preferred = beside  # e.g. a terminate beside the run of its session
        elif theme < 0.45:
            preferred = [s for s in candidates if s.op is Op.CREATE and s.profile not in used]
        elif theme < 0.75:
            wanted = {Op.CREATE} if i == 0 else _WORK
            preferred = [s for s in candidates if s.op in wanted]
        else:
            preferred = []
        step = with_jitter(pick(preferred or candidates, rng), space, rng)
        trial.apply(step)
        out.append(step)
    return out if len(out) >= 2 else []


def _beside(step: Step, first: Step) -> bool:
    """Whether the op table asks for `step` beside `first` (same subject, an op it lists)."""
    spec = SPECS[step.op]
    name = spec.subject.value
    return first.op in spec.beside and getattr(step, name) == getattr(first, name)
