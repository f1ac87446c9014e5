"""PCT over steps: probabilistic concurrency testing, bug depth d (Burckhardt et al., ASPLOS'10).

Each schedule starts from a plan: a random well-formed walk whose steps are dealt to threads, so
that every thread has a program of ops up front (its steps of the plan, in plan order). PCT then
interleaves the programs. Threads get random distinct priorities d .. d+n-1, and d-1 change
points are drawn among the k steps. At each point the highest-priority thread whose next op is
enabled runs it; a thread whose next op is not enabled yet (a `run` of a session another thread
has not created, a `read` of a value not yet allocated) waits, like a blocked thread. After the
i-th change point's step, the thread that ran it drops to priority i, below every initial one.
When every remaining thread is blocked for good (its session was released first, say) the
highest-priority one drops its next op, as if the call had failed, and the others go on.

The guarantee (Theorem 1 of the paper, carried over to steps): if a bug shows whenever d
ordering constraints between steps hold (its depth), one PCT schedule with parameter d of a
program with n threads and k steps hits it with probability at least 1 / (n * k^(d-1)). Here
n <= max_threads and k < max_steps, so with the defaults (4 threads, 24 steps) that is at least
1/96 per schedule for d = 2 and 1/2304 for d = 3 (the default; the seeded bugs, such as "create
dml; create mgx; run dml on another thread", have depth 2 or 3). The bound is for a fixed
program; programs are random here too, which is what lets PCT find which program matters.

After ordering, adjacent steps on distinct threads that may overlap are merged into overlap
groups now and then (pairs of creates of different profiles most often), and rare jitter is
added. The bound says nothing about those. This strategy does not learn from results.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

from racefuzz.errors import RacefuzzError
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.strategies.base import State, finish, with_jitter
from racefuzz.strategies.random_walk import walk
from racefuzz.strategies.space import Space

# Chance that two adjacent steps on distinct threads are merged into an overlap group.
PAIR_OF_CREATES = 0.6  # creates of different profiles: concurrent construction (B8)
PAIR_WITH_CREATE = 0.25  # a create beside other work
PAIR_OTHER = 0.08


class PCT:
    """PCT with bug depth `depth` (d >= 1); the same seed makes the same schedules."""

    name = "pct"

    def __init__(self, space: Space, seed: int, *, depth: int = 3) -> None:
        if depth < 1:
            raise RacefuzzError(f"pct: depth must be at least 1, not {depth}")
        self.space = space
        self.depth = depth
        self._rng = random.Random(seed)
        # The plan is a plain sequential walk: groups and jitter are laid over the final order.
        self._plan_space = replace(space, groups=False, jitter=False)

    def next_schedule(self) -> Schedule:
        rng = self._rng
        plan = walk(self._plan_space, rng, group_rate=0.0)
        n, d = plan.threads, self.depth
        programs: list[deque[Step]] = [deque() for _ in range(n)]
        for s in plan.steps[1:]:
            programs[s.thread].append(s)
        k = len(plan.steps) - 1
        priority = dict(enumerate(rng.sample(range(d, d + n), n)))
        change = {at: i + 1 for i, at in enumerate(rng.sample(range(1, k + 1), min(d - 1, k)))}
        order = interleave(plan.steps[0], programs, priority, change, self.space)
        steps = overlay_groups(order, n, self.space, rng)
        steps = [with_jitter(s, self.space, rng) for s in steps]
        return finish(steps, n, self.space, description=f"pct d={d}")

    def observe(self, result: RunResult) -> None:
        pass


def interleave(
    first: Step,
    programs: list[deque[Step]],
    priority: dict[int, int],
    change: dict[int, int],
    space: Space,
) -> list[Step]:
    """PCT's order of the threads' programs after `first` (the opening register).

    `priority`: thread -> priority, higher runs first. `change`: the count of steps run after
    which the running thread drops to the given priority. Consumes `programs`.
    """
    state = State(len(programs))
    state.apply(first)  # nothing else is enabled before it
    ran = 0
    while any(programs):
        waiting = [t for t in range(len(programs)) if programs[t]]
        ready = [t for t in waiting if state.allows(programs[t][0], space)]
        if not ready:  # blocked for good: the highest thread's next op fails and is dropped
            programs[max(waiting, key=priority.__getitem__)].popleft()
            continue
        t = max(ready, key=priority.__getitem__)
        state.apply(programs[t].popleft())
        ran += 1
        if ran in change:
            priority[t] = change[ran]
    return state.steps


def overlay_groups(steps: list[Step], threads: int, space: Space, rng: random.Random) -> list[Step]:
    """Merge some adjacent pairs on distinct threads into overlap groups where they may overlap."""
    if not space.groups:
        return list(steps)
    state = State(threads)
    i = 0
    while i < len(steps):
        a = steps[i]
        b = steps[i + 1] if i + 1 < len(steps) else None
        if b is not None and a.thread != b.thread and rng.random() < _pair_rate(a, b):
            gid = state.next_group_id()
            trial = state.copy()
            ga, gb = replace(a, group=gid), replace(b, group=gid)
            if trial.allows(ga, space):
                trial.apply(ga)
                if trial.allows(gb, space):
                    trial.apply(gb)
                    state = trial
                    i += 2
                    continue
        state.apply(a)
        i += 1
    return state.steps


def _pair_rate(a: Step, b: Step) -> float:
    creates = (a.op is Op.CREATE) + (b.op is Op.CREATE)
    if creates == 2 and a.profile != b.profile:
        return PAIR_OF_CREATES
    return PAIR_WITH_CREATE if creates else PAIR_OTHER
