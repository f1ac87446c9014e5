"""Strategies: where schedules come from. One module a strategy, one small protocol (`base`).

`make(name, space, seed, corpus)` builds one by name; the same arguments make the same sequence of
schedules. `replay` hands out the corpus itself, strictly, once each.

This package generates schedules; it never runs them (the executor does) and never judges
results (the oracles do). Strategies only learn from results handed to `observe`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.model import Schedule
from racefuzz.strategies.base import Strategy
from racefuzz.strategies.mutate import Mutator
from racefuzz.strategies.pct import PCT
from racefuzz.strategies.portfolio import Portfolio
from racefuzz.strategies.random_walk import RandomWalk
from racefuzz.strategies.replay import Replay
from racefuzz.strategies.space import Space
from racefuzz.strategies.swarm import Swarm

__all__ = [
    "PCT",
    "Mutator",
    "Portfolio",
    "RandomWalk",
    "Replay",
    "Space",
    "Strategy",
    "Swarm",
    "make",
    "names",
]

_BUILDERS: dict[str, Callable[[Space, int, Sequence[Schedule]], Strategy]] = {
    "random": lambda space, seed, corpus: RandomWalk(space, seed),
    "pct": lambda space, seed, corpus: PCT(space, seed),
    "swarm": lambda space, seed, corpus: Swarm(space, seed),
    "mutate": lambda space, seed, corpus: Mutator(space, seed, corpus=corpus),
    "portfolio": lambda space, seed, corpus: Portfolio(space, seed, corpus=corpus),
    "replay": lambda space, seed, corpus: Replay(space, seed, schedules=corpus),
}


def names() -> list[str]:
    """The strategy names `make` knows, sorted."""
    return sorted(_BUILDERS)


def make(name: str, space: Space, seed: int, corpus: Sequence[Schedule] = ()) -> Strategy:
    """The strategy called `name`, built from `space` and `seed` (and seeded with `corpus`)."""
    builder = _BUILDERS.get(name)
    if builder is None:
        raise RacefuzzError(f"unknown strategy '{name}' (known: {', '.join(names())})")
    return builder(space, seed, corpus)
