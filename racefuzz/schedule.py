"""The schedule: the one data type every stage of racefuzz shares.

A schedule is an order of calls across threads. Steps run in list order, one at a time, each on
its own thread, handed over by the worker's sequencer, so an order replays exactly. A run of
consecutive steps may share a `group`: they are released together behind a barrier and truly
overlap (races inside native calls need that). `jitter_us` is a sleep taken on the step's thread
just before it runs; it is recorded here so that a jittered run replays too.

Schedules are serialised as versioned JSON a person can read and edit. Decoding is strict: an
unknown version, an unknown field or op, or an ill-formed order (a `run` before its `create`) is a
`ScheduleError` with one line that names the step. Well-formedness is kept by generation and by
shrinking; `problems()` is the single definition of it.

This module knows nothing of ORT, targets or models beyond their names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from racefuzz.errors import RacefuzzError

VERSION = 1
MAX_JITTER_US = 100_000
# Far beyond anything generated (24 steps, 4 threads by default) or worth shrinking; a bigger
# file is a mistake, and would tie a worker up for minutes.
MAX_STEPS = 1000
MAX_THREADS = 64


class ScheduleError(RacefuzzError):
    """A schedule file or value that racefuzz cannot run as written."""


class Op(StrEnum):
    """The calls a step can make (all through the public onnxruntime Python API)."""

    REGISTER = "register"  # register_execution_provider_library (one library, or all of them)
    UNREGISTER = "unregister"
    CREATE = "create"  # InferenceSession for a profile and a model
    RUN = "run"  # session.run on fresh random inputs, checked against the CPU reference
    RUN_BOUND = "run_bound"  # run through IOBinding, inputs and outputs in device memory
    COPY = "copy"  # env-level copy_tensors host -> device -> host, checked byte for byte
    ALLOC = "alloc"  # allocate a device value, upload random data, keep it alive
    READ = "read"  # copy a kept device value back to host and compare with what was uploaded
    FREE = "free"  # drop a kept device value
    RELEASE = "release"  # drop a session and collect it


SESSION_OPS = frozenset({Op.RUN, Op.RUN_BOUND, Op.RELEASE})
VALUE_OPS = frozenset({Op.READ, Op.FREE})
# Ops that need the profile's EP library registered at the moment they run: device memory is
# found through the library's OrtEpDevice, which unregistering destroys.
NEEDS_REGISTRATION = frozenset({Op.CREATE, Op.RUN_BOUND, Op.COPY, Op.ALLOC, Op.READ})
# Env-level device memory only has a backend once some session picked one (the seed's OGA
# creates its session first), so these need an earlier `create` in the schedule.
NEEDS_EARLIER_CREATE = frozenset({Op.COPY, Op.ALLOC})

# Which optional fields each op carries; anything else on a step is an error.
_FIELDS: Mapping[Op, frozenset[str]] = {
    Op.REGISTER: frozenset({"library"}),
    Op.UNREGISTER: frozenset({"library"}),
    Op.CREATE: frozenset({"session", "profile", "model"}),
    Op.RUN: frozenset({"session"}),
    Op.RUN_BOUND: frozenset({"session"}),
    Op.RELEASE: frozenset({"session"}),
    Op.COPY: frozenset({"profile"}),
    Op.ALLOC: frozenset({"value", "profile"}),
    Op.READ: frozenset({"value"}),
    Op.FREE: frozenset({"value"}),
}
_REQUIRED: Mapping[Op, frozenset[str]] = {op: names - {"library"} for op, names in _FIELDS.items()}
STEP_FIELDS = ("thread", "op", "group", "jitter_us")
OPTIONAL_FIELDS = ("library", "session", "profile", "model", "value")


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

    def describe(self) -> str:
        """A short human form, e.g. `create s1 (dml, mlp)`, used in tables and timelines."""
        if self.op is Op.CREATE:
            return f"create {self.session} ({self.profile}, {self.model})"
        if self.op in SESSION_OPS:
            return f"{self.op} {self.session}"
        if self.op is Op.COPY:
            return f"copy ({self.profile})"
        if self.op is Op.ALLOC:
            return f"alloc {self.value} ({self.profile})"
        if self.op in VALUE_OPS:
            return f"{self.op} {self.value}"
        return f"{self.op} {self.library}" if self.library else str(self.op)


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
            if s.op is Op.CREATE and s.session and s.profile:
                out.setdefault(s.session, s.profile)
        return out

    def step_profile(self, index: int) -> str | None:
        """The profile a step works on: its own, or that of the session it names."""
        step = self.steps[index]
        if step.profile is not None:
            return step.profile
        if step.session is not None:
            for s in reversed(self.steps[:index]):
                if s.op is Op.CREATE and s.session == step.session:
                    return s.profile
        if step.value is not None:
            for s in reversed(self.steps[:index]):
                if s.op is Op.ALLOC and s.value == step.value:
                    return s.profile
        return None


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
    alive_sessions: set[str] = set()
    alive_values: set[str] = set()
    created_any = False

    def is_registered(profile: str | None) -> bool:
        if library_of is None or profile is None:
            return bool(registered)
        lib = library_of(profile)
        return lib is None or "*" in registered or lib in registered

    for i, s in enumerate(schedule.steps):
        where = f"step {i}"
        if not 0 <= s.thread < schedule.threads:
            out.append(f"{where}: thread {s.thread} is outside 0..{schedule.threads - 1}")
        if not 0 <= s.jitter_us <= MAX_JITTER_US:
            out.append(f"{where}: jitter_us must be within 0..{MAX_JITTER_US}")
        for name in OPTIONAL_FIELDS:
            has = getattr(s, name) is not None
            if has and name not in _FIELDS[s.op]:
                out.append(f"{where}: '{s.op}' takes no '{name}'")
            elif not has and name in _REQUIRED[s.op]:
                out.append(f"{where}: '{s.op}' needs a '{name}'")
        profile = s.profile
        if s.op in SESSION_OPS or s.op in VALUE_OPS:
            profile = schedule.step_profile(i)
        key = s.library or "*"
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
        if s.op in NEEDS_REGISTRATION and not is_registered(profile):
            out.append(f"{where}: '{s.op}' while the EP library of '{profile}' is not registered")
        if s.op in NEEDS_EARLIER_CREATE and not created_any:
            out.append(f"{where}: '{s.op}' before any 'create' (no backend chosen yet)")
        if s.op is Op.CREATE and s.session is not None:
            if s.session in alive_sessions:
                out.append(f"{where}: 'create' of session '{s.session}' that is alive")
            alive_sessions.add(s.session)
            created_any = True
        elif s.op in SESSION_OPS and s.session is not None:
            if s.session not in alive_sessions:
                out.append(f"{where}: '{s.op}' of session '{s.session}' before its 'create'")
            if s.op is Op.RELEASE:
                alive_sessions.discard(s.session)
        elif s.op is Op.ALLOC and s.value is not None:
            if s.value in alive_values:
                out.append(f"{where}: 'alloc' of value '{s.value}' that is alive")
            alive_values.add(s.value)
        elif s.op in VALUE_OPS and s.value is not None:
            if s.value not in alive_values:
                out.append(f"{where}: '{s.op}' of value '{s.value}' before its 'alloc'")
            if s.op is Op.FREE:
                alive_values.discard(s.value)
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


# What a step makes, for the overlap rule: a session, a value, or a library's registration.
_MAKES = frozenset({Op.CREATE, Op.ALLOC, Op.REGISTER})


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
    named: dict[tuple[str, str], tuple[int, Op]] = {}  # (kind, name) -> first step naming it
    # Keys that some step of the group registers or unregisters (order within a group is moot).
    registers = [
        s.library or "*" for s in steps[start:stop] if s.op in (Op.REGISTER, Op.UNREGISTER)
    ]
    for k in range(start, stop):
        s = steps[k]
        for kind, name in (("session", s.session), ("value", s.value), ("library", None)):
            if kind == "library" and s.op in (Op.REGISTER, Op.UNREGISTER):
                name = s.library or "*"
            if name is None:
                continue
            earlier = named.setdefault((kind, name), (k, s.op))
            if earlier[0] != k and (earlier[1] in _MAKES or s.op in _MAKES):
                out.append(
                    f"step {k}: '{s.op}' of {kind} '{name}' overlaps step {earlier[0]} "
                    f"('{earlier[1]}') in group {g}"
                )
        if s.op in NEEDS_EARLIER_CREATE and first_create is not None and start <= first_create < k:
            out.append(f"step {k}: '{s.op}' overlaps the first 'create' in group {g}")
        if s.op in NEEDS_REGISTRATION and registers:
            profile = schedule.step_profile(k)
            # Without the target's map, which library a profile needs is unknown: let it be.
            lib = library_of(profile) if library_of and profile else None
            if lib is not None and ("*" in registers or lib in registers or lib == "*"):
                out.append(
                    f"step {k}: '{s.op}' overlaps a register/unregister it needs in group {g}"
                )
    return out


def is_well_formed(
    schedule: Schedule, library_of: Callable[[str], str | None] | None = None
) -> bool:
    return not problems(schedule, library_of)
