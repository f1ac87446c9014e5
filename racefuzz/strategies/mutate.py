"""Mutation of corpus and found schedules, in the manner of AFL's havoc stage.

Seeds are the corpus given at construction (named scenarios, earlier campaigns' findings) plus
every observed schedule whose run had findings or did something no earlier run did (a new exit,
a new per-op outcome or error message, a new finding signature; see `base.behaviour`). Each
schedule is one to three stacked mutations of a seed, seeds with findings drawn more often:

- insert a step enabled at a random point, on a random (possibly new) thread;
- delete a step (a `create` takes its session's steps with it, an `alloc` its value's);
- swap two adjacent steps; move a step to another thread;
- merge two adjacent steps on distinct threads into an overlap group; split or drop a group;
- change the profile of a create, copy or alloc;
- duplicate a span of steps, with fresh names for what the copy creates.

A candidate is then repaired (`base.repair`: steps that no longer fit are dropped, groups that no
longer fit are dissolved) and rejected if it lost its opening `register`, grew past the space's
length, or came back unchanged. Nothing ill-formed is ever emitted. With no seeds yet, or when a
seed yields nothing after a few tries, the strategy falls back to a random walk.

It does not decide what is interesting beyond the coarse novelty above, and it keeps no seeds on
disk: the campaign owns the corpus.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.schedule.op_table import SPECS
from racefuzz.strategies.base import State, behaviour, pick_enabled, repair
from racefuzz.strategies.random_walk import walk
from racefuzz.strategies.space import Space

ATTEMPTS = 8  # mutations tried on one seed before falling back to a random walk
MAX_FOUND = 256  # newest observed seeds kept (the corpus is always kept)
FINDING_BIAS = 0.5  # chance of mutating a seed whose run had findings, when there are some
MAX_SPAN = 6  # longest span `duplicate` copies

Steps = list[Step]
Mutation = Callable[[Steps, int, Space, random.Random], tuple[Steps, int] | None]


class Mutator:
    """Mutates seeds from the corpus and from observed results; same seed, same sequence."""

    name = "mutate"

    def __init__(self, space: Space, seed: int, *, corpus: Sequence[Schedule] = ()) -> None:
        self.space = space
        self._rng = random.Random(seed)
        self._corpus = list(corpus)
        self._found: deque[Schedule] = deque(maxlen=MAX_FOUND)
        self._failing: deque[Schedule] = deque(maxlen=MAX_FOUND)
        self._seen: set[str] = set()

    @property
    def seeds(self) -> int:
        return len(self._corpus) + len(self._found) + len(self._failing)

    def next_schedule(self) -> Schedule:
        rng = self._rng
        parent = self._choose_parent()
        if parent is not None:
            for _ in range(ATTEMPTS):
                child = mutate(parent, self.space, rng)
                if child is not None:
                    return child
        return walk(self.space, rng)

    def observe(self, result: RunResult) -> None:
        new = behaviour(result) - self._seen
        self._seen |= new
        if result.findings:
            self._failing.append(result.schedule)
        elif new:
            self._found.append(result.schedule)

    def _choose_parent(self) -> Schedule | None:
        rng = self._rng
        if self._failing and rng.random() < FINDING_BIAS:
            return rng.choice(self._failing)
        pool = [*self._corpus, *self._found, *self._failing]
        return rng.choice(pool) if pool else None


def mutate(
    parent: Schedule, space: Space, rng: random.Random, count: int | None = None
) -> Schedule | None:
    """One to three stacked mutations of `parent`, repaired; None when nothing new came out."""
    steps, threads = list(parent.steps), parent.threads
    applied: list[str] = []
    for _ in range(count or rng.choice((1, 1, 1, 2, 2, 3))):
        name, mutation = rng.choice(MUTATIONS)
        out = mutation(steps, threads, space, rng)
        if out is not None:
            (steps, threads), applied = out, [*applied, name]
    if not applied:
        return None
    fixed = repair(steps, threads, space)
    if not fixed or fixed[0].op is not Op.REGISTER:
        return None
    if len(fixed) > max(space.max_steps, len(parent.steps)):
        return None
    what = f"mutant of {parent.name or 'a schedule'}: {', '.join(applied)}"
    child = Schedule(threads, tuple(fixed), description=what)
    if child == replace(parent, name="") or space.problems(child):
        return None
    return child


def _fresh_group(steps: Steps) -> int:
    return max((s.group for s in steps if s.group is not None), default=0) + 1


def _names(steps: Steps) -> set[str]:
    return {n for s in steps for n in (s.session, s.value) if n is not None}


def _other_thread(thread: int, threads: int, space: Space, rng: random.Random) -> int | None:
    """A thread other than `thread`: an existing one, or one more if the space allows it."""
    choices = [t for t in range(min(threads + 1, max(space.max_threads, threads))) if t != thread]
    return rng.choice(choices) if choices else None


def insert(
    steps: Steps, threads: int, space: Space, rng: random.Random
) -> tuple[Steps, int] | None:
    i = rng.randint(1, len(steps)) if steps else 0
    t = rng.randrange(min(threads + 1, max(space.max_threads, threads)))
    threads = max(threads, t + 1)
    # The state of the prefix, as far as it fits; names of the whole schedule stay taken.
    state = State(threads)
    for s in steps[:i]:
        s = replace(s, group=None)
        if state.allows(s, space):
            state.apply(s)
    state.names |= _names(steps)
    step = pick_enabled(state, t, space, rng)
    if step is None:
        return None
    return [*steps[:i], step, *steps[i:]], threads


def delete(
    steps: Steps, threads: int, space: Space, rng: random.Random
) -> tuple[Steps, int] | None:
    if len(steps) < 2:
        return None
    i = rng.randrange(1, len(steps))
    made = [(kind, name) for kind, name, makes in steps[i].names() if makes]
    out = steps[:i]
    for s in steps[i + 1 :]:
        named = {(kind, name): makes for kind, name, makes in s.names()}
        # The name is made again: later steps are the new one's.
        made = [m for m in made if not named.get(m)]
        if not any(m in named for m in made):
            out.append(s)
    return out, threads


def swap(steps: Steps, threads: int, space: Space, rng: random.Random) -> tuple[Steps, int] | None:
    if len(steps) < 3:
        return None
    i = rng.randrange(1, len(steps) - 1)
    out = list(steps)
    out[i], out[i + 1] = out[i + 1], out[i]
    return out, threads


def move(steps: Steps, threads: int, space: Space, rng: random.Random) -> tuple[Steps, int] | None:
    i = rng.randrange(len(steps))
    t = _other_thread(steps[i].thread, threads, space, rng)
    if t is None:
        return None
    out = list(steps)
    out[i] = replace(steps[i], thread=t)
    return out, max(threads, t + 1)


def merge(steps: Steps, threads: int, space: Space, rng: random.Random) -> tuple[Steps, int] | None:
    pairs = [i for i in range(len(steps) - 1) if steps[i].thread != steps[i + 1].thread]
    creates = [i for i in pairs if steps[i].op is Op.CREATE and steps[i + 1].op is Op.CREATE]
    if not pairs:
        return None
    i = rng.choice(creates if creates and rng.random() < 0.5 else pairs)
    gid = next((g for g in (steps[i].group, steps[i + 1].group) if g is not None), None)
    gid = _fresh_group(steps) if gid is None else gid
    out = list(steps)
    out[i], out[i + 1] = replace(steps[i], group=gid), replace(steps[i + 1], group=gid)
    return out, threads


def split(steps: Steps, threads: int, space: Space, rng: random.Random) -> tuple[Steps, int] | None:
    spans = list(Schedule(threads, tuple(steps)).groups())
    if not spans:
        return None
    start, stop = rng.choice(spans)
    cut = rng.randrange(start, stop)
    out = list(steps)
    if cut == start:  # drop the whole group
        out[start:stop] = [replace(s, group=None) for s in steps[start:stop]]
    else:
        fresh = _fresh_group(steps)
        out[cut:stop] = [replace(s, group=fresh) for s in steps[cut:stop]]
    return out, threads


def change_profile(
    steps: Steps, threads: int, space: Space, rng: random.Random
) -> tuple[Steps, int] | None:
    where = [i for i, s in enumerate(steps) if "profile" in SPECS[s.op].fields]
    if not where or len(space.profiles) < 2:
        return None
    i = rng.choice(where)
    profile = rng.choice([p for p in space.profiles if p != steps[i].profile])
    out = list(steps)
    out[i] = replace(steps[i], profile=profile)
    return out, threads


def duplicate(
    steps: Steps, threads: int, space: Space, rng: random.Random
) -> tuple[Steps, int] | None:
    if len(steps) < 2:
        return None
    i = rng.randrange(1, len(steps))
    j = rng.randint(i + 1, min(len(steps), i + MAX_SPAN))
    taken = _names(steps)
    renamed: dict[str, str] = {}
    groups: dict[int, int] = {}
    fresh_group = _fresh_group(steps)
    copy: Steps = []
    for s in steps[i:j]:
        for _, made, makes in s.names():
            if not makes:
                continue
            prefix, k = re.sub(r"\d+$", "", made) or "x", 1
            while f"{prefix}{k}" in taken:
                k += 1
            renamed[made] = f"{prefix}{k}"
            taken.add(renamed[made])
        group = None
        if s.group is not None:
            group = groups.setdefault(s.group, fresh_group + len(groups))
        copy.append(
            replace(
                s,
                session=renamed.get(s.session or "", s.session),
                value=renamed.get(s.value or "", s.value),
                peer=renamed.get(s.peer or "", s.peer),
                group=group,
            )
        )
    return [*steps[:j], *copy, *steps[j:]], threads


MUTATIONS: tuple[tuple[str, Mutation], ...] = (
    ("insert", insert),
    ("delete", delete),
    ("swap", swap),
    ("move", move),
    ("merge", merge),
    ("split", split),
    ("change profile", change_profile),
    ("duplicate", duplicate),
)
