"""The schedule: the one data type every stage of racefuzz shares.

A schedule is an order of calls across threads. Steps run in list order, one at a time, each on
its own thread, handed over by the worker's sequencer, so an order replays exactly. A run of
consecutive steps may share a `group`: they are released together behind a barrier and truly
overlap (races inside native calls need that). `jitter_us` is a sleep taken on the step's thread
just before it runs; it is recorded here so that a jittered run replays too.

Schedules are serialised as versioned JSON a person can read and edit. Decoding is strict: an
unknown version, an unknown field, op or mode, or an ill-formed order (a `run` before its
`create`) is a `ScheduleError` with one line that names the step. Well-formedness is kept by
generation and by shrinking; `problems()` is the single definition of it, and reads what each op
takes, makes, uses and ends from the op table (`racefuzz.schedule.op_table`).

This module knows nothing of ORT, targets or models beyond their names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.op_table import LIVE_KINDS, NAME_FIELDS, SPECS, Effect, Op, Subject, maker

__all__ = ["Op"]  # re-exported: most modules take `Op` from here, with `Step`

VERSION = 1
MAX_JITTER_US = 100_000
# Far beyond anything generated (24 steps, 4 threads by default) or worth shrinking; a bigger
# file is a mistake, and would tie a worker up for minutes.
MAX_STEPS = 1000
MAX_THREADS = 64


class ScheduleError(RacefuzzError):
    """A schedule file or value that racefuzz cannot run as written."""


STEP_FIELDS = ("thread", "op", "group", "jitter_us")
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
        return text + (f" [{self.mode}]" if self.mode is not None else "")

    def name_of(self, kind: Subject) -> str | None:
        """The session or value this step names as its subject (made, used or ended)."""
        return getattr(self, kind.value) if SPECS[self.op].subject is kind else None

    def names(self) -> Iterator[tuple[Subject, str, bool]]:
        """(kind, name, made here) for every session or value the step names, peer included."""
        spec = SPECS[self.op]
        if spec.subject in LIVE_KINDS and (name := getattr(self, spec.subject.value)) is not None:
            yield spec.subject, name, spec.effect is Effect.MAKES
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


def _field_problems(s: Step, where: str) -> list[str]:
    spec, out = SPECS[s.op], []
    for name in OPTIONAL_FIELDS:
        has = getattr(s, name) is not None
        if has and name not in spec.fields:
            out.append(f"{where}: '{s.op}' takes no '{name}'")
        elif not has and name in spec.required:
            out.append(f"{where}: '{s.op}' needs a '{name}'")
    if s.mode is not None and spec.modes and s.mode not in spec.modes:
        out.append(f"{where}: '{s.op}' has no mode '{s.mode}' (one of {', '.join(spec.modes)})")
    return out


def problems(
    schedule: Schedule, library_of: Callable[[str], str | None] | None = None
) -> list[str]:
    """Every reason the schedule is not well-formed, as `step N: ...` lines; [] when it is.

    `library_of` maps a profile to the EP library it needs registered (None for ORT's own
    EPs); without it, any registration satisfies any profile.
    """
    out: list[str] = []
    if schedule.threads < 1:
        out.append(f"threads must be at least 1, not {schedule.threads}")
    registered: set[str] = set()  # "*" stands for "all libraries"
    alive: dict[Subject, set[str]] = {kind: set() for kind in LIVE_KINDS}
    created_any = False

    def is_registered(profile: str | None) -> bool:
        if library_of is None or profile is None:
            return bool(registered)
        lib = library_of(profile)
        return lib is None or "*" in registered or lib in registered

    for i, s in enumerate(schedule.steps):
        where, spec = f"step {i}", SPECS[s.op]
        if not 0 <= s.thread < schedule.threads:
            out.append(f"{where}: thread {s.thread} is outside 0..{schedule.threads - 1}")
        if not 0 <= s.jitter_us <= MAX_JITTER_US:
            out.append(f"{where}: jitter_us must be within 0..{MAX_JITTER_US}")
        out += _field_problems(s, where)
        key = s.library or "*"
        # The backbone: the library lifecycle.
        if s.op is Op.REGISTER:
            if key in registered or ("*" in registered):
                out.append(f"{where}: 'register' of {key} while it is registered")
            registered.add(key)
        elif s.op is Op.UNREGISTER:
            if key not in registered and "*" not in registered:
                out.append(f"{where}: 'unregister' of {key} while it is not registered")
            if key == "*":
                registered.clear()
            else:
                registered.discard(key)
        if spec.needs_registration:
            for profile in schedule.step_profiles(i):
                if not is_registered(profile):
                    out.append(
                        f"{where}: '{s.op}' while the EP library of '{profile}' is not registered"
                    )
        if spec.needs_earlier_create and not created_any:
            out.append(f"{where}: '{s.op}' before any 'create' (no backend chosen yet)")
        for kind, name, made in s.names():
            if made:
                if name in alive[kind]:
                    out.append(f"{where}: '{s.op}' of {kind} '{name}' that is alive")
                alive[kind].add(name)
            elif name not in alive[kind]:
                made_by = maker(kind).op
                out.append(f"{where}: '{s.op}' of {kind} '{name}' before its '{made_by}'")
        if spec.effect is Effect.ENDS and spec.subject in LIVE_KINDS:
            alive[spec.subject].discard(getattr(s, spec.subject.value) or "")
        created_any = created_any or (s.op is Op.CREATE and s.session is not None)
    out.extend(_group_problems(schedule, library_of))
    return out


def _group_problems(
    schedule: Schedule, library_of: Callable[[str], str | None] | None
) -> list[str]:
    out: list[str] = []
    seen: set[int] = set()
    for start, stop in schedule.groups():
        g = schedule.steps[start].group
        assert g is not None
        if g in seen:
            out.append(f"step {start}: group {g} is not one consecutive run of steps")
        seen.add(g)
        threads = [s.thread for s in schedule.steps[start:stop]]
        if len(set(threads)) != len(threads):
            out.append(f"step {start}: group {g} has two steps on one thread")
        out.extend(_overlap_problems(schedule, start, stop, library_of))
    return out


def _overlap_problems(
    schedule: Schedule, start: int, stop: int, library_of: Callable[[str], str | None] | None
) -> list[str]:
    """Steps of one group are released together and may run in any order, so none may depend
    on another: no use of a session or value that a step of the group makes (or a make of one
    that a step of the group uses), no copy or alloc beside the schedule's first `create`, no
    step beside the `register` or `unregister` of the library it needs (ORT's contract: a
    library is not unregistered while sessions on it are being built)."""
    out: list[str] = []
    steps = schedule.steps
    g = steps[start].group
    first_create = next((i for i, s in enumerate(steps) if s.op is Op.CREATE), None)
    # (kind, name) -> the first step of the group naming it, its op, and whether it makes it.
    named: dict[tuple[str, str], tuple[int, Op, bool]] = {}
    # Keys that some step of the group registers or unregisters (order within a group is moot).
    registers = [s.library or "*" for s in steps[start:stop] if _is_lifecycle(s.op)]
    for k in range(start, stop):
        s = steps[k]
        spec = SPECS[s.op]
        names: list[tuple[str, str, bool]] = [(str(kind), n, m) for kind, n, m in s.names()]
        if _is_lifecycle(s.op):
            names.append(("library", s.library or "*", spec.effect is Effect.MAKES))
        for kind, name, makes in names:
            earlier = named.setdefault((kind, name), (k, s.op, makes))
            if earlier[0] != k and (earlier[2] or makes):
                out.append(
                    f"step {k}: '{s.op}' of {kind} '{name}' overlaps step {earlier[0]} "
                    f"('{earlier[1]}') in group {g}"
                )
        if spec.needs_earlier_create and first_create is not None and start <= first_create < k:
            out.append(f"step {k}: '{s.op}' overlaps the first 'create' in group {g}")
        if spec.needs_registration and registers:
            # Without the target's map, which library a profile needs is unknown: let it be.
            libs = [library_of(p) for p in schedule.step_profiles(k) if library_of and p]
            if any(
                lib is not None and ("*" in registers or lib in registers or lib == "*")
                for lib in libs
            ):
                out.append(
                    f"step {k}: '{s.op}' overlaps a register/unregister it needs in group {g}"
                )
    return out


def _is_lifecycle(op: Op) -> bool:
    """`register` and `unregister`: the steps whose subject is a library's registration."""
    return SPECS[op].subject is Subject.LIBRARY


def is_well_formed(
    schedule: Schedule, library_of: Callable[[str], str | None] | None = None
) -> bool:
    return not problems(schedule, library_of)
