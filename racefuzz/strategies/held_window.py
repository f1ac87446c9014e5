"""A held window: the random walk's way to use the EP-ABI layer's scheduling points.

A lone `hold` step does little: the point fires only if a run of its session follows on some
thread, and the window it opens matters only if another thread does something while that run is
parked. So, on a layered target, the walk now and then lays the whole pattern down at once:

    hold sN [point]        (any thread)
    <a run of sN>          (thread A: it parks at the point)
    1-2 steps elsewhere    (other threads: a create or release most often, or other work)
    resume sN              (another thread than A)

Each step is still drawn from what `enabled_steps` allows, so the pattern is well-formed by the
same rules as any step; the shrinker later keeps only what the finding needs.
"""

from __future__ import annotations

import random

from racefuzz.schedule.model import Op, Step
from racefuzz.schedule.op_table import SPECS, Subject
from racefuzz.strategies.base import State, enabled_steps, pick
from racefuzz.strategies.space import Space

HOLD_RATE = 0.08  # chance, before each step of a walk on a layered target, of a held window
# What the other threads do while a run is parked, favoured: a session's start or end (B21's
# window), then anything enabled.
_LIFECYCLE = frozenset({Op.CREATE, Op.RELEASE})


def propose_held_window(state: State, space: Space, rng: random.Random, room: int) -> list[Step]:
    """The steps of one held window, each allowed after the ones before; [] when none fits."""
    if Op.HOLD not in space.ops or state.threads < 2 or room < 4:
        return []
    trial = state.copy()
    parked = rng.randrange(state.threads)
    holds = [s for s in enabled_steps(trial, parked, space, rng) if s.op is Op.HOLD]
    if not holds:
        return []
    hold = pick(holds, rng)
    runs = [
        s
        for s in enabled_steps(trial, parked, space, rng)
        if SPECS[s.op].race_kind == "run" and s.session == hold.session
    ]
    if not runs:
        return []
    out = [hold, pick(runs, rng)]
    for s in out:
        trial.apply(s)
    others = [t for t in range(state.threads) if t != parked]
    for _ in range(rng.randint(1, min(2, room - 3))):
        candidates = [
            s
            for s in enabled_steps(trial, rng.choice(others), space, rng)
            if s.op not in (Op.HOLD, Op.RESUME) and SPECS[s.op].subject is not Subject.LIBRARY
        ]
        if not candidates:
            break
        lifecycle = [s for s in candidates if s.op in _LIFECYCLE and s.session != hold.session]
        step = pick(lifecycle if lifecycle and rng.random() < 0.6 else candidates, rng)
        trial.apply(step)
        out.append(step)
    resume = Step(rng.choice(others), Op.RESUME, session=hold.session)
    if not trial.allows(resume, space):
        return []
    return [*out, resume]
