"""What "simpler" means for schedules: the shortlex order the shrinker minimises.

`sort_key` is the one definition; `shrink.consider` accepts a candidate only when its key is
smaller, so every pass terminates and the result is independent of pass order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import PREFIX, SPECS

# Name ranks: no name, then canonical names by number (s1 < s2 < s10), then anything else.
_NameRank = tuple[int, int, str]
SortKey = tuple[
    int,
    int,
    int,
    int,
    int,
    int,
    int,
    int,
    int,
    int,
    int,
    tuple[int, ...],
    tuple[tuple[_NameRank, ...], ...],
]


def sort_key(schedule: Schedule, models_by_size: Sequence[str] = ()) -> SortKey:
    """THE definition of "simpler": a smaller key is simpler.

    In order: fewer steps, fewer threads in use (then declared), fewer overlap groups (then fewer
    grouped steps), less jitter (fewer jittered steps, then fewer microseconds), fewer steps with
    a mode (the plain op is simpler than a variant of it), fewer steps that size dims (then
    smaller sizes), smaller models
    (their index in `models_by_size`, smallest first; unknown models rank after all of them),
    then lower thread numbers step by step, then earlier names (s1.., v1.., groups 0..).
    First-use renumbering (`shrink_passes.normalised`) gives the lowest of the last two.
    """
    steps = schedule.steps
    groups = list(schedule.groups())
    models = list(models_by_size)
    return (
        len(steps),
        len({s.thread for s in steps}),
        schedule.threads,
        len(groups),
        sum(stop - start for start, stop in groups),
        sum(1 for s in steps if s.jitter_us),
        sum(s.jitter_us for s in steps),
        sum(1 for s in steps if s.mode is not None),
        sum(1 for s in steps if s.dims),
        sum(sum(s.dims) for s in steps),
        sum(
            models.index(s.model) if s.model in models else len(models)
            for s in steps
            if "model" in SPECS[s.op].fields
        ),
        tuple(s.thread for s in steps),
        tuple(
            (
                _name_rank(s.session, "s"),
                _name_rank(s.value, "v"),
                _name_rank(s.peer, PREFIX[kind]) if (kind := SPECS[s.op].peer) else (0, 0, ""),
                (0, -1, "") if s.group is None else (1, s.group, ""),
            )
            for s in steps
        ),
    )


def _name_rank(name: str | None, prefix: str) -> _NameRank:
    if name is None:
        return (0, 0, "")
    m = re.fullmatch(prefix + r"([1-9][0-9]*)", name)
    return (1, int(m[1]), "") if m else (2, 0, name)
