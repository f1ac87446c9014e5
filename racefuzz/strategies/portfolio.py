"""A portfolio: mixes strategies, shifting weight to those that find what was not seen before.

No single strategy wins everywhere (Coyote runs a portfolio for the same reason): random walks
find shallow orders fast, PCT deep ones, swarm the bugs that need an op kind absent, mutation the
neighbours of what was already found. Each pick is a weighted draw among the members. The
weights come from a bandit with decay: each member keeps a value, a moving average of rewards
over its own observed schedules (`value <- decay * value + (1 - decay) * reward`), where the
reward is 1 for a result with a finding signature no earlier result had, `NOVELTY` for a result
that was new in a lesser way (a new outcome or message, see `base.behaviour`), and 0 otherwise.
A member's weight is `floor + (1 - n * floor) * value / sum(values)`, so every member keeps at
least `floor` (10% by default) of the picks: a strategy that found nothing lately still gets
its chance, and old successes fade.

Every observed result is passed on to every member (the mutator seeds from all of them).
Per-member counters feed the dashboard through `stats()`. The portfolio does not run anything
and does not decide what a finding is.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence

from racefuzz.errors import RacefuzzError
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.strategies.base import Strategy, behaviour
from racefuzz.strategies.mutate import Mutator
from racefuzz.strategies.pct import PCT
from racefuzz.strategies.random_walk import RandomWalk
from racefuzz.strategies.space import Space
from racefuzz.strategies.swarm import Swarm

MEMBERS = ("random", "pct", "swarm", "mutate")
FLOOR = 0.10  # the least share of picks any member keeps
DECAY = 0.95  # per observed schedule of that member: about the last 20 count
PRIOR = 0.5  # every member starts equal, and optimistic
NOVELTY = 0.1  # reward for a result new in some way but with no new signature
MAX_PENDING = 4096  # schedules handed out and not yet observed that we remember the source of
_COUNTERS = ("schedules", "observed", "findings", "new_signatures")


class Portfolio:
    """Mixes `members` by a decaying bandit with an exploration floor; same seed, same picks."""

    name = "portfolio"

    def __init__(
        self,
        space: Space,
        seed: int,
        *,
        corpus: Sequence[Schedule] = (),
        members: Sequence[str] = MEMBERS,
        floor: float = FLOOR,
        decay: float = DECAY,
    ) -> None:
        builders: dict[str, Callable[[int], Strategy]] = {
            "random": lambda s: RandomWalk(space, s),
            "pct": lambda s: PCT(space, s),
            "swarm": lambda s: Swarm(space, s),
            "mutate": lambda s: Mutator(space, s, corpus=corpus),
        }
        unknown = [m for m in members if m not in builders]
        if unknown or not members or len(set(members)) != len(members):
            known = ", ".join(builders)
            raise RacefuzzError(f"portfolio: members must be distinct names among {known}")
        if not 0 <= floor * len(members) <= 1:
            raise RacefuzzError(
                f"portfolio: a floor of {floor} for {len(members)} members is more than all picks"
            )
        self._rng = random.Random(seed)
        # Each member gets its own seed drawn from ours, so one seed fixes the whole portfolio.
        self._members = {m: builders[m](self._rng.getrandbits(64)) for m in members}
        self.floor = floor
        self.decay = decay
        self._value = dict.fromkeys(members, PRIOR)
        self._counts = {m: dict.fromkeys(_COUNTERS, 0) for m in members}
        self._exhausted: set[str] = set()
        self._pending: dict[Schedule, deque[str]] = {}
        self._signatures: set[str] = set()
        self._behaviour: set[str] = set()
        self.last_source: str | None = None  # the member behind the last schedule handed out

    def weights(self) -> dict[str, float]:
        """Each live member's chance of the next pick (they sum to 1)."""
        live = [m for m in self._members if m not in self._exhausted]
        if not live:
            return {}
        total = sum(self._value[m] for m in live)
        share = 1.0 - self.floor * len(live)
        return {
            m: self.floor + share * (self._value[m] / total if total > 0 else 1 / len(live))
            for m in live
        }

    def next_schedule(self) -> Schedule | None:
        while weights := self.weights():
            name = self._rng.choices(list(weights), weights=list(weights.values()))[0]
            schedule = self._members[name].next_schedule()
            if schedule is None:
                self._exhausted.add(name)
                continue
            if len(self._pending) >= MAX_PENDING:
                del self._pending[next(iter(self._pending))]
            self._pending.setdefault(schedule, deque()).append(name)
            self._counts[name]["schedules"] += 1
            self.last_source = name
            return schedule
        return None

    def observe(self, result: RunResult) -> None:
        signatures = {f.signature for f in result.findings}
        new_signatures = signatures - self._signatures
        self._signatures |= signatures
        seen = behaviour(result)
        new_behaviour = bool(seen - self._behaviour)
        self._behaviour |= seen
        source = self._pending.get(result.schedule)
        if source:
            name = source.popleft()
            if not source:
                del self._pending[result.schedule]
            counts = self._counts[name]
            counts["observed"] += 1
            counts["findings"] += len(result.findings)
            counts["new_signatures"] += len(new_signatures)
            reward = 1.0 if new_signatures else NOVELTY if new_behaviour else 0.0
            self._value[name] = self.decay * self._value[name] + (1 - self.decay) * reward
        for member in self._members.values():
            member.observe(result)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per member: schedules handed out, results observed, findings, new signatures, and
        the current weight in percent."""
        weights = self.weights()
        return {
            m: {**counts, "weight_pct": round(100 * weights.get(m, 0.0))}
            for m, counts in self._counts.items()
        }
