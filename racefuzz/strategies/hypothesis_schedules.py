"""Hypothesis strategies for well-formed schedules (and for spaces), for racefuzz's own tests.

`schedules(space)` describes the same space the generators walk: a `register` first, then steps
drawn from `base.enabled_steps`, then some adjacent steps on distinct threads merged into overlap
groups where they may overlap, and some jitter. Every draw goes through Hypothesis, so failing
examples shrink (fewer steps, fewer threads, earlier candidates). `spaces()` draws small spaces,
with and without named libraries, so that properties hold beyond the example target.

These are for property tests (JSON round trip, well-formedness, mutation closure); campaigns use
the seeded strategies, whose distributions are tuned for the seeded bugs. Nothing here runs ORT.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.schedule.op_table import REQUIRED_OPS
from racefuzz.strategies.base import (
    MAX_GENERATED_JITTER_US,
    State,
    enabled_steps,
    finish,
)
from racefuzz.strategies.space import Space


def schedules(space: Space) -> st.SearchStrategy[Schedule]:
    """Well-formed schedules of `space`: `space.problems(s) == []` for every one drawn."""
    return _schedules(space)


@st.composite
def _schedules(draw: st.DrawFn, space: Space) -> Schedule:
    n = draw(st.integers(1, space.max_threads))
    length = draw(st.integers(1, space.max_steps))
    needed = sorted({k for p in space.profiles if (k := space.library_for(p)) is not None})
    key = draw(st.sampled_from(needed or list(space.library_keys())))
    first = Step(draw(st.integers(0, n - 1)), Op.REGISTER, library=None if key == "*" else key)
    state = State(n)
    state.apply(first)
    while len(state.steps) < length:
        candidates = enabled_steps(state, draw(st.integers(0, n - 1)), space)
        if not candidates:
            break
        state.apply(draw(st.sampled_from(candidates)))
    plan = state.steps
    # Overlap groups and jitter are laid over the sequential plan: grouping only adds
    # constraints, and a step that cannot join its neighbour's group simply stays alone.
    joins = [space.groups and n > 1 and draw(st.integers(0, 3)) == 0 for _ in plan]
    state, current, next_id = State(n), None, 1
    for i, step in enumerate(plan):
        if space.jitter and draw(st.integers(0, 9)) == 0:
            step = replace(step, jitter_us=draw(st.integers(0, MAX_GENERATED_JITTER_US)))
        grouped = replace(step, group=current)
        if i > 0 and joins[i - 1] and current is not None and state.allows(grouped, space):
            step = grouped
        elif joins[i]:
            current, next_id = next_id, next_id + 1
            step = replace(step, group=current)
        else:
            current = None
        state.apply(step)
    return finish(state.steps, n, space)


@st.composite
def _spaces(draw: st.DrawFn) -> Space:
    profiles = tuple(
        draw(
            st.lists(
                st.sampled_from(["dml", "mgx", "hip", "cpu"]), min_size=1, max_size=3, unique=True
            )
        )
    )
    models = tuple(
        draw(st.lists(st.sampled_from(["mlp", "conv", "big"]), min_size=1, max_size=2, unique=True))
    )
    libraries: tuple[str, ...] = ()
    library_of: dict[str, str | None] = {}
    if draw(st.booleans()):
        libraries = tuple(
            draw(st.lists(st.sampled_from(["liba", "libb"]), min_size=1, max_size=2, unique=True))
        )
        for p in profiles:
            library_of[p] = draw(st.sampled_from([*libraries, None]))
    optional = sorted(set(Op) - REQUIRED_OPS)
    ops = frozenset(draw(st.lists(st.sampled_from(optional), unique=True))) | REQUIRED_OPS
    return Space(
        profiles=profiles,
        models=models,
        libraries=libraries,
        library_of=library_of,
        max_threads=draw(st.integers(1, 4)),
        max_steps=draw(st.integers(1, 24)),
        ops=ops,
        max_sessions=draw(st.integers(1, 4)),
        max_values=draw(st.integers(0, 2)),
        lifecycle=draw(st.booleans()),
        groups=draw(st.booleans()),
        jitter=draw(st.booleans()),
    )


def spaces() -> st.SearchStrategy[Space]:
    """Small valid spaces: one to three profiles, one or two models, named libraries or not."""
    return _spaces()
