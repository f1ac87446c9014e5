"""Swarm testing (Groce et al., ISSTA'12): each schedule draws from a randomly narrowed space.

A schedule that may do everything rarely does any one thing much: with every op kind enabled, a
walk spends its steps spread thin, and some bugs need an op kind to be *absent* (no `release`
keeps two sessions alive; no `copy` keeps the slot untouched). So each schedule first draws a
configuration: every optional op kind and every profile kept with probability `keep` (the op
table's essential ones, register, create and run, always stay, so something happens; at least
one profile stays, and usually two, since most seeded bugs need two backends), and each feature
toggle (overlap groups, jitter, mid-schedule lifecycle) kept with the same
probability where the space has it. Then it walks the narrowed space like the random strategy.
The configuration is recorded in the schedule's description.

It does not learn which configurations pay off; the portfolio weighs strategies, not these.
"""

from __future__ import annotations

import random
from dataclasses import replace

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import SPECS
from racefuzz.strategies.random_walk import walk
from racefuzz.strategies.space import Space

ALWAYS = frozenset(op for op, spec in SPECS.items() if spec.essential)
KEEP = 0.7  # above Groce's 1/2: the seeded bugs need three or four op kinds at once
TWO_PROFILES = 0.75  # chance that a draw keeping fewer than two profiles gets a second one


class Swarm:
    """Random walks over a per-schedule random subset of ops, profiles and features."""

    name = "swarm"

    def __init__(self, space: Space, seed: int, *, keep: float = KEEP) -> None:
        self.space = space
        self.keep = keep
        self._rng = random.Random(seed)

    def configure(self) -> Space:
        """The narrowed space for the next schedule."""
        rng, space, keep = self._rng, self.space, self.keep
        ops = frozenset(op for op in sorted(space.ops) if op in ALWAYS or rng.random() < keep)
        kept = [p for p in space.profiles if rng.random() < keep]
        # Most seeded bugs need two backends, so a one-profile draw is usually topped up.
        want = 2 if rng.random() < TWO_PROFILES else 1
        rest = [p for p in space.profiles if p not in kept]
        kept += rng.sample(rest, min(len(rest), max(0, want - len(kept))))
        profiles = tuple(p for p in space.profiles if p in kept)
        return replace(
            space,
            ops=ops | (ALWAYS & space.ops),
            profiles=profiles,
            groups=space.groups and rng.random() < keep,
            jitter=space.jitter and rng.random() < keep,
            lifecycle=space.lifecycle and rng.random() < keep,
        )

    def next_schedule(self) -> Schedule:
        narrowed = self.configure()
        schedule = walk(narrowed, self._rng)
        # Narrowing only removes choices, so the schedule is well-formed in the full space too.
        assert not self.space.problems(schedule)
        features = [f for f in ("groups", "jitter", "lifecycle") if getattr(narrowed, f)]
        description = (
            f"swarm: ops {','.join(sorted(narrowed.ops))}; profiles {','.join(narrowed.profiles)};"
            f" features {','.join(features) or 'none'}"
        )
        return replace(schedule, description=description)

    def observe(self, result: RunResult) -> None:
        pass
