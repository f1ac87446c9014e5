"""The shrink passes, and the schedule transformations they are built from.

A pass is a plain function of the shrinker's state (`Shrinking`): it builds candidates from the
current best schedule and offers each to `consider`, which runs it and keeps it when it is simpler
and still fails the same way. Passes never run anything themselves and never compare schedules:
`racefuzz.shrink.order.sort_key` alone says what "simpler" means, and `consider` enforces it, so
a pass may offer a candidate that turns out not to be simpler (it is then skipped, not run).

`PASSES` lists them in the order they run, biggest cuts first, as Hypothesis' shrinker does: a
pass that deletes a whole thread makes the later, finer passes cheaper.

Transformations keep schedules well-formed where they can (deleting a `create` deletes its
session's steps, see `without`); `consider` still filters every candidate through
`racefuzz.schedule.model.problems`, the well-formedness rules of `racefuzz.schedule.rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from racefuzz.schedule.model import Schedule, Step
from racefuzz.schedule.op_table import PREFIX, SPECS, Subject
from racefuzz.schedule.rules import Rules, RuleSet, check_schedule


class Shrinking(Protocol):
    """What a pass sees of the shrinker: the best schedule so far and a way to offer another."""

    @property
    def current(self) -> Schedule: ...

    @property
    def models_by_size(self) -> Sequence[str]: ...

    def consider(self, candidate: Schedule | None) -> bool:
        """Run `candidate` if it is simpler; True when it became `current`."""
        ...

    def delete(self, indices: Iterable[int]) -> Schedule | None:
        """`current` less those steps and their dependants (see `without`)."""
        ...


# --- transformations --------------------------------------------------------------------------


def without(
    schedule: Schedule,
    indices: Iterable[int],
    library_of: Callable[[str], str | None] | None = None,
) -> Schedule | None:
    """`schedule` less the steps at `indices` and every step that needs one of them.

    A `create` takes its session's later steps with it, an `alloc` its value's; anything else a
    deletion leaves ill-formed (a `create` whose `register` went, a `copy` with no `create`
    before it, the `unregister` of a deleted `register`) is found by the well-formedness rules
    (`racefuzz.schedule.rules`: each problem names its step) and deleted in turn. None when
    nothing would be deleted or no well-formed schedule is left that way.
    """
    drop = _with_dependants(schedule.steps, set(indices))
    if not drop:
        return None
    candidate = _drop(schedule, drop)
    # Each round deletes at least one step, so this ends (an empty schedule is well-formed).
    rules = RuleSet(Rules.WELL_FORMED, library_of)
    while found := check_schedule(candidate, rules):
        bad = {p.step for p in found if p.step is not None}
        if not bad:
            return None
        candidate = _drop(candidate, _with_dependants(candidate.steps, bad))
    return candidate


def _drop(schedule: Schedule, drop: set[int]) -> Schedule:
    return schedule.with_steps(s for i, s in enumerate(schedule.steps) if i not in drop)


def _with_dependants(steps: Sequence[Step], drop: set[int]) -> set[int]:
    out = {i for i in drop if 0 <= i < len(steps)}
    todo = list(out)
    while todo:
        i = todo.pop()
        for kind, name, makes in steps[i].names():
            if makes:
                _add_users(steps, i, (kind, name), out, todo)
    return out


def _add_users(
    steps: Sequence[Step], i: int, made: tuple[Subject, str], out: set[int], todo: list[int]
) -> None:
    """Add the steps after `i` that name what step `i` made, as subject or as peer."""
    for j in range(i + 1, len(steps)):
        named = {(kind, name): makes for kind, name, makes in steps[j].names()}
        if made not in named:
            continue
        if named[made]:
            break  # the name was released and made again: a new life that does not need us
        if j not in out:
            out.add(j)
            todo.append(j)


def normalised(schedule: Schedule) -> Schedule:
    """Threads, sessions (s1..), values (v1..) and groups renumbered in first-use order.

    First-use order is the renumbering that `sort_key` ranks lowest; unused threads go.
    """
    threads: dict[int, int] = {}
    renamed: dict[Subject, dict[str, str]] = {kind: {} for kind in PREFIX}
    groups: dict[int, int] = {}
    steps = []

    def rename(kind: Subject, name: str | None) -> str | None:
        names = renamed[kind]
        return name and names.setdefault(name, f"{PREFIX[kind]}{len(names) + 1}")

    for s in schedule.steps:
        thread = threads.setdefault(s.thread, len(threads))
        session = rename(Subject.SESSION, s.session)
        value = rename(Subject.VALUE, s.value)
        peer_kind = SPECS[s.op].peer
        peer = rename(peer_kind, s.peer) if peer_kind is not None else s.peer
        group = None if s.group is None else groups.setdefault(s.group, len(groups) + 1)
        steps.append(
            replace(s, thread=thread, session=session, value=value, peer=peer, group=group)
        )
    return replace(schedule, threads=max(1, len(threads)), steps=tuple(steps))


def _ungroup_clashes(schedule: Schedule) -> Schedule:
    """Dissolve groups that now hold two steps of one thread (they could not overlap)."""
    clashing: set[int] = set()
    for start, stop in schedule.groups():
        threads = [s.thread for s in schedule.steps[start:stop]]
        if len(set(threads)) != len(threads):
            clashing.update(range(start, stop))
    return ungrouped(schedule, clashing)


def ungrouped(schedule: Schedule, indices: Iterable[int]) -> Schedule:
    """The schedule with those steps in no overlap group."""
    ungroup = set(indices)
    return schedule.with_steps(
        replace(s, group=None) if i in ungroup else s for i, s in enumerate(schedule.steps)
    )


def _rethreaded(schedule: Schedule, thread_of: Callable[[int, Step], int]) -> Schedule:
    steps = (replace(s, thread=thread_of(i, s)) for i, s in enumerate(schedule.steps))
    return normalised(_ungroup_clashes(schedule.with_steps(steps)))


def merged(schedule: Schedule, keep: int, gone: int) -> Schedule:
    """Thread `gone`'s steps moved onto thread `keep`, threads renumbered."""
    return _rethreaded(schedule, lambda _, s: keep if s.thread == gone else s.thread)


def moved(schedule: Schedule, index: int, thread: int) -> Schedule:
    """Step `index` moved onto `thread`, threads renumbered (so a move to a higher thread can
    still end lower: the first step's thread is always 0 after renumbering)."""
    return _rethreaded(schedule, lambda i, s: thread if i == index else s.thread)


def _with_step(schedule: Schedule, index: int, step: Step) -> Schedule:
    return schedule.with_steps((*schedule.steps[:index], step, *schedule.steps[index + 1 :]))


def _used_threads(schedule: Schedule) -> list[int]:
    return sorted({s.thread for s in schedule.steps})


# --- passes, biggest cuts first ---------------------------------------------------------------


def drop_threads(sh: Shrinking) -> None:
    """Delete every step of one thread."""
    for t in reversed(_used_threads(sh.current)):
        sh.consider(sh.delete(i for i, s in enumerate(sh.current.steps) if s.thread == t))


def delete_spans(sh: Shrinking) -> None:
    """Delta debugging's chunk deletion: halves, quarters, ... down to pairs of steps."""
    size = len(sh.current.steps) // 2
    while size >= 2:
        start = 0
        while start < len(sh.current.steps):
            # After a cut the next chunk has moved into `start`: stay there.
            if not sh.consider(sh.delete(range(start, start + size))):
                start += size
        size //= 2


def delete_steps(sh: Shrinking) -> None:
    """Delete one step (with its dependants), from the last to the first.

    Dependants always come later, so walking backwards never skips a step.
    """
    i = len(sh.current.steps) - 1
    while i >= 0:
        sh.consider(sh.delete([i]))
        i = min(i, len(sh.current.steps)) - 1


def merge_threads(sh: Shrinking) -> None:
    """Move all of one thread's steps onto another; the highest threads go first."""
    while _merge_two(sh):
        pass  # renumbered: start again from the new thread list


def _merge_two(sh: Shrinking) -> bool:
    used = _used_threads(sh.current)
    return any(
        sh.consider(merged(sh.current, keep, gone))
        for gone in reversed(used)
        for keep in used
        if keep != gone
    )


def drop_groups(sh: Shrinking) -> None:
    """Stop a whole group from overlapping, then take single steps out of groups."""
    g = 0
    while g < len(groups := list(sh.current.groups())):
        if not sh.consider(ungrouped(sh.current, range(*groups[g]))):
            g += 1
    g = 0
    while g < len(groups := list(sh.current.groups())):
        if not _take_one_out(sh, *groups[g]):
            g += 1


def _take_one_out(sh: Shrinking, start: int, stop: int) -> bool:
    # A step left in the middle of a group would split it, so it leaves just before or after.
    for member in range(start, stop):
        for before in (True, False):
            steps = list(sh.current.steps)
            lone = replace(steps[member], group=None)
            rest = steps[start:member] + steps[member + 1 : stop]
            block = [lone, *rest] if before else [*rest, lone]
            if sh.consider(sh.current.with_steps(steps[:start] + block + steps[stop:])):
                return True
    return False


def drop_jitter(sh: Shrinking) -> None:
    """All jitter at once, then one step's at a time."""
    cur = sh.current
    sh.consider(cur.with_steps(replace(s, jitter_us=0) for s in cur.steps))
    for i in range(len(sh.current.steps)):  # clearing jitter never moves a step
        cur = sh.current
        if cur.steps[i].jitter_us:
            sh.consider(_with_step(cur, i, replace(cur.steps[i], jitter_us=0)))


def smaller_dims(sh: Shrinking) -> None:
    """All dims at once, then one step's: gone (every dim 1), then each dim alone set to 1 or
    halved (the rounds of passes halve it again while the failure holds)."""
    cur = sh.current
    sh.consider(cur.with_steps(replace(s, dims=()) for s in cur.steps))
    for i in range(len(sh.current.steps)):  # sizing dims never moves a step
        if sh.current.steps[i].dims:
            sh.consider(_with_step(sh.current, i, replace(sh.current.steps[i], dims=())))
        for j in range(len(sh.current.steps[i].dims)):
            for smaller in (1, sh.current.steps[i].dims[j] // 2):
                dims = sh.current.steps[i].dims
                if 1 <= smaller < dims[j]:
                    step = replace(sh.current.steps[i], dims=(*dims[:j], smaller, *dims[j + 1 :]))
                    sh.consider(_with_step(sh.current, i, step))


def drop_modes(sh: Shrinking) -> None:
    """Each step's mode back to the plain op, where its table entry allows the plain op."""
    for i in range(len(sh.current.steps)):  # clearing a mode never moves a step
        step = sh.current.steps[i]
        if step.mode is not None and None in SPECS[step.op].mode_choices:
            sh.consider(_with_step(sh.current, i, replace(step, mode=None)))


def smaller_models(sh: Shrinking) -> None:
    """Every session on the smallest model at once, then each session on the smallest that
    still fails."""
    models = list(sh.models_by_size)
    if not models:
        return
    cur = sh.current
    sh.consider(
        cur.with_steps(replace(s, model=models[0]) if s.model is not None else s for s in cur.steps)
    )
    for i in range(len(sh.current.steps)):
        cur = sh.current
        step = cur.steps[i]
        if step.model is None:
            continue
        rank = models.index(step.model) if step.model in models else len(models)
        for model in models[:rank]:
            if sh.consider(_with_step(cur, i, replace(step, model=model))):
                break


def move_steps(sh: Shrinking) -> None:
    """Move one step onto another thread that is in use (lower numbers first)."""
    i = 0
    while i < len(sh.current.steps):
        cur = sh.current
        for t in _used_threads(cur):
            if t != cur.steps[i].thread and sh.consider(moved(cur, i, t)):
                break
        i += 1


def normalise(sh: Shrinking) -> None:
    """Renumber threads, sessions, values and groups in first-use order."""
    sh.consider(normalised(sh.current))


PASSES: tuple[Callable[[Shrinking], None], ...] = (
    drop_threads,
    delete_spans,
    delete_steps,
    merge_threads,
    drop_groups,
    drop_jitter,
    smaller_dims,
    drop_modes,
    smaller_models,
    move_steps,
    normalise,
)
