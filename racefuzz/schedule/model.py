"""The schedule: the one data type every stage of racefuzz shares.

A schedule is an order of calls across threads. Steps run in list order, one at a time, each on
its own thread, handed over by the worker's sequencer, so an order replays exactly. A run of
consecutive steps may share a `group`: they are released together behind a barrier and truly
overlap (races inside native calls need that). `jitter_us` is a sleep taken on the step's thread
just before it runs; it is recorded here so that a jittered run replays too.

Schedules are serialised as versioned JSON a person can read and edit. Decoding is strict: an
unknown version, an unknown field, op or mode, or an ill-formed order (a `run` before its
`create`) is a `ScheduleError` with one line that names the step. Well-formedness is kept by
generation and by shrinking; `problems()` reports it, from the one rule checker
(`racefuzz.schedule.rules`), which reads what each op takes, makes, uses and ends from the op
table (`racefuzz.schedule.op_table`).

This module knows nothing of ORT, targets or models beyond their names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.op_table import LIVE_KINDS, NAME_FIELDS, SPECS, Effect, Op, Subject
from racefuzz.schedule.rules import MAX_JITTER_US, Rules, RuleSet, check_schedule

# Re-exported: most modules take `Op` from here, with `Step`, and the jitter limit with it.
__all__ = ["MAX_JITTER_US", "Op"]

VERSION = 1
# Far beyond anything generated (24 steps, 4 threads by default) or worth shrinking; a bigger
# file is a mistake, and would tie a worker up for minutes.
MAX_STEPS = 1000
MAX_THREADS = 64


class ScheduleError(RacefuzzError):
    """A schedule file or value that racefuzz cannot run as written."""


STEP_FIELDS = ("thread", "op", "group", "jitter_us", "dims")
OPTIONAL_FIELDS = NAME_FIELDS  # omitted from JSON when None


@dataclass(frozen=True)
class Step:
    """One call on one thread. Fields an op does not use stay None."""

    thread: int
    op: Op
    session: str | None = None
    profile: str | None = None
    model: str | None = None
    value: str | None = None
    library: str | None = None  # None: every library of the target
    group: int | None = None  # steps sharing a group are released together and overlap
    jitter_us: int = 0
    mode: str | None = None  # a variant of the op, one of its table entry's modes
    peer: str | None = None  # a second session or value the op uses (the table says which)
    # Sizes of the model's symbolic dims (batch, sequence...) in the order its inputs first name
    # them, for an op that feeds a session fresh inputs; () or a dim left out: 1.
    dims: tuple[int, ...] = ()

    def describe(self) -> str:
        """A short human form, e.g. `create s1 (dml, mlp)`, used in tables and timelines:
        the op, its subject's name, then profile and model, peer and mode where it has them."""
        spec = SPECS[self.op]
        text = str(self.op)
        if spec.subject is not Subject.PROFILE and getattr(self, spec.subject.value):
            text += f" {getattr(self, spec.subject.value)}"
        where = [v for f in ("profile", "model") if f in spec.fields and (v := getattr(self, f))]
        if where:
            text += f" ({', '.join(where)})"
        if self.peer is not None:
            text += f" -> {self.peer}"
        text += f" [{self.mode}]" if self.mode is not None else ""
        return text + (" {" + "x".join(map(str, self.dims)) + "}" if self.dims else "")

    def name_of(self, kind: Subject) -> str | None:
        """The session or value this step names as its subject (made, used or ended)."""
        return getattr(self, kind.value) if SPECS[self.op].subject is kind else None

    def names(self) -> Iterator[tuple[Subject, str, bool]]:
        """(kind, name, made here) for every session or value the step names, peer included."""
        spec = SPECS[self.op]
        subject = spec.subject  # a StrEnum: the name of its field, as it is
        if subject in LIVE_KINDS and (name := getattr(self, subject)) is not None:
            yield subject, name, spec.effect is Effect.MAKES
        if spec.peer is not None and self.peer is not None:
            yield spec.peer, self.peer, False


def make_step(op: Op, thread: int, **names: str | None) -> Step:
    """A step of `op` with those of `names` (field -> value) that the op takes."""
    takes = SPECS[op].fields

    def get(name: str) -> str | None:
        return names.get(name) if name in takes else None

    return Step(
        thread,
        op,
        session=get("session"),
        profile=get("profile"),
        model=get("model"),
        value=get("value"),
        library=get("library"),
        mode=get("mode"),
        peer=get("peer"),
    )


@dataclass(frozen=True)
class Schedule:
    """Threads and an ordered tuple of steps; `name`/`description` are for people."""

    threads: int
    steps: tuple[Step, ...]
    name: str = ""
    description: str = field(default="", compare=False)

    def with_steps(self, steps: Iterable[Step]) -> Schedule:
        return replace(self, steps=tuple(steps))

    def profiles(self) -> frozenset[str]:
        return frozenset(s.profile for s in self.steps if s.profile is not None)

    def ops(self) -> frozenset[Op]:
        return frozenset(s.op for s in self.steps)

    def models(self) -> frozenset[str]:
        return frozenset(s.model for s in self.steps if s.model is not None)

    def sessions(self) -> frozenset[str]:
        return frozenset(s.session for s in self.steps if s.session is not None)

    def groups(self) -> Iterator[tuple[int, int]]:
        """(start, stop) index ranges of overlap groups, in order."""
        i = 0
        while i < len(self.steps):
            g = self.steps[i].group
            j = i + 1
            if g is not None:
                while j < len(self.steps) and self.steps[j].group == g:
                    j += 1
                yield i, j
            i = j

    def session_profiles(self) -> dict[str, str]:
        """The profile each session name was created with (first create wins)."""
        out: dict[str, str] = {}
        for s in self.steps:
            if SPECS[s.op].makes(Subject.SESSION) and s.session and s.profile:
                out.setdefault(s.session, s.profile)
        return out

    def step_profile(self, index: int) -> str | None:
        """The profile a step works on: its own, or that of the session or value it names."""
        step = self.steps[index]
        if step.profile is not None:
            return step.profile
        for kind in LIVE_KINDS:
            name = getattr(step, kind.value)
            if name is not None:
                return self.made_with(kind, name, index)
        return None

    def made_with(self, kind: Subject, name: str, before: int) -> str | None:
        """The profile of the session or value `name` as last made before step `before`."""
        for s in reversed(self.steps[:before]):
            if SPECS[s.op].makes(kind) and getattr(s, kind.value) == name:
                return s.profile
        return None

    def step_profiles(self, index: int) -> list[str | None]:
        """The profiles a step works on: `step_profile`'s, then its peer's."""
        step = self.steps[index]
        peer = SPECS[step.op].peer
        out = [self.step_profile(index)]
        if peer is not None and step.peer is not None:
            out.append(self.made_with(peer, step.peer, index))
        return out


def problems(
    schedule: Schedule, library_of: Callable[[str], str | None] | None = None
) -> list[str]:
    """Every reason the schedule is not well-formed, as `step N: ...` lines; [] when it is.

    `library_of` maps a profile to the EP library it needs registered (None for ORT's own
    EPs); without it, any registration satisfies any profile. The rules are
    `racefuzz.schedule.rules`' well-formedness set; `check_schedule` there gives them as
    `Problem`s, with the step each names.
    """
    return [str(p) for p in check_schedule(schedule, RuleSet(Rules.WELL_FORMED, library_of))]


def is_well_formed(
    schedule: Schedule, library_of: Callable[[str], str | None] | None = None
) -> bool:
    return not problems(schedule, library_of)
