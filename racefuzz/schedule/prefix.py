"""What a schedule prefix leaves behind, as the rules of `racefuzz.schedule.rules` read it.

`Prefix` is that model: registered libraries, live sessions and values (and, for ORT's contract,
the profile each lives on), whether a backend was chosen, and the overlap group the last step is
in, with the model where that group began (steps released together may run in any order, so a
step of a group is checked against both). It depends on the steps alone, never on which rules
are asked, so one walk serves any rule set.

This module sits below `racefuzz.schedule.model`, whose `problems()` is a rule check: it knows
steps and schedules by their shape (`Step`, `Schedule`), and ops from the op table.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from racefuzz.schedule.op_table import LIVE_KINDS, SPECS, Effect, Op, Subject


class Step(Protocol):
    """What the rules read of a step (`racefuzz.schedule.model.Step` is one)."""

    @property
    def thread(self) -> int: ...
    @property
    def op(self) -> Op: ...
    @property
    def session(self) -> str | None: ...
    @property
    def profile(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def library(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...
    @property
    def dims(self) -> tuple[int, ...]: ...
    @property
    def group(self) -> int | None: ...
    @property
    def jitter_us(self) -> int: ...
    @property
    def mode(self) -> str | None: ...
    @property
    def peer(self) -> str | None: ...
    def names(self) -> Iterator[tuple[Subject, str, bool]]:
        """(kind, name, made here) for every session or value the step names, peer included."""
        ...


class Schedule(Protocol):
    """What the rules read of a schedule (`racefuzz.schedule.model.Schedule` is one)."""

    @property
    def threads(self) -> int: ...
    @property
    def steps(self) -> Sequence[Step]: ...


@dataclass
class GroupRun:
    """The overlap group being walked: a consecutive run of steps sharing `group`."""

    group: int
    start: int
    threads: set[int] = field(default_factory=set)
    doubled: bool = False  # two of its steps share a thread (reported once)
    # (kind, name) -> the first step naming it, its op, and whether it makes it
    named: dict[tuple[str, str], tuple[int, Op, bool]] = field(default_factory=dict)
    registers: list[str] = field(default_factory=list)  # keys its (un)register steps touch
    uploads: set[str] = field(default_factory=set)  # values an `upload` of the group writes
    # steps that need a library registered, with the profiles they work on
    needs: list[tuple[int, Op, list[str | None]]] = field(default_factory=list)

    def copy(self) -> GroupRun:
        return replace(
            self,
            threads=set(self.threads),
            named=dict(self.named),
            registers=list(self.registers),
            uploads=set(self.uploads),
            needs=list(self.needs),
        )


@dataclass
class Prefix:
    """What a prefix leaves behind; it depends on the steps alone, never on the rules."""

    count: int = 0  # steps recorded: the index of the next one
    registered: set[str] = field(default_factory=set)  # keys, "*" standing for every library
    ever_registered: set[str] = field(default_factory=set)
    alive: dict[Subject, set[str]] = field(default_factory=lambda: {k: set() for k in LIVE_KINDS})
    created_any: bool = False  # a `create` of a session chose a backend
    first_create: int | None = None  # index of the first `create` step
    # (kind, name) -> the profile its last maker named
    made_with: dict[tuple[Subject, str], str | None] = field(default_factory=dict)
    # The contract's view: (kind, name) -> the profile it lives on, in the order made.
    in_use: dict[tuple[Subject, str], str] = field(default_factory=dict)
    # Values an `upload [stream]` wrote: nothing Python can call orders that upload before a
    # later use (see `racefuzz.schedule.contract`), so they stay here until freed.
    unordered: set[str] = field(default_factory=set)
    # Sessions with a `hold` armed and no `resume` since -> whether a call of it came after the
    # hold (then it may be parked inside ORT, in flight until the resume).
    holds: dict[str, bool] = field(default_factory=dict)
    groups_seen: set[int] = field(default_factory=set)
    run: GroupRun | None = None  # the group the last step is in
    base: Prefix | None = None  # the model where that group began

    def copy(self) -> Prefix:
        return replace(
            self,
            registered=set(self.registered),
            ever_registered=set(self.ever_registered),
            alive={k: set(v) for k, v in self.alive.items()},
            made_with=dict(self.made_with),
            in_use=dict(self.in_use),
            unordered=set(self.unordered),
            holds=dict(self.holds),
            groups_seen=set(self.groups_seen),
            run=self.run.copy() if self.run is not None else None,
        )  # `base` is never changed once taken: shared

    @property
    def parked(self) -> set[str]:
        """Sessions a call of which may be parked by a hold right now."""
        return {name for name, called in self.holds.items() if called}

    def run_of(self, group: int | None) -> GroupRun | None:
        """The group a step of `group` would continue, if it continues one."""
        run = self.run
        return run if run is not None and group == run.group else None

    def step_profiles(self, s: Step) -> list[str | None]:
        """What `Schedule.step_profiles` says of `s` as the next step."""
        out = [self.step_profile(s)]
        peer = SPECS[s.op].peer
        if peer is not None and s.peer is not None:
            out.append(self.made_with.get((peer, s.peer)))
        return out

    def step_profile(self, s: Step) -> str | None:
        if s.profile is not None:
            return s.profile
        for kind in LIVE_KINDS:
            name = getattr(s, kind.value)
            if name is not None:
                return self.made_with.get((kind, name))
        return None

    def record(self, s: Step) -> None:
        """Take `s` as the next step."""
        i, spec = self.count, SPECS[s.op]
        self._record_group(s, i)
        subject = getattr(s, spec.subject.value) if spec.subject in LIVE_KINDS else None
        if subject and spec.effect is Effect.MAKES:
            if made_on := self.step_profile(s):
                self.in_use[(spec.subject, subject)] = made_on
        elif subject and spec.effect is Effect.ENDS:
            self.in_use.pop((spec.subject, subject), None)
        key = s.library or "*"
        if s.op is Op.REGISTER:
            self.registered.add(key)
            self.ever_registered.add(key)
        elif s.op is Op.UNREGISTER:
            if key == "*":
                self.registered.clear()
            else:
                self.registered.discard(key)
        for kind, name, makes in s.names():
            if makes:
                self.alive[kind].add(name)
        if spec.effect is Effect.ENDS and spec.subject in LIVE_KINDS:
            self.alive[spec.subject].discard(subject or "")
        for kind in LIVE_KINDS:
            if spec.makes(kind) and (name := getattr(s, kind.value)) is not None:
                self.made_with[(kind, name)] = s.profile
        if s.op is Op.UPLOAD and s.mode == "stream" and s.value is not None:
            self.unordered.add(s.value)
        elif s.op is Op.FREE and s.value is not None:
            self.unordered.discard(s.value)
        self._record_holds(s)
        if s.op is Op.CREATE:
            self.created_any = self.created_any or s.session is not None
            self.first_create = i if self.first_create is None else self.first_create
        self.count += 1

    def _record_holds(self, s: Step) -> None:
        # A call parks through its peer session too (`keep v1 -> s1` runs s1).
        if s.op is Op.HOLD and s.session is not None:
            self.holds.setdefault(s.session, False)
        elif s.op in (Op.RESUME, Op.RELEASE, Op.HARD_RELEASE) and s.session is not None:
            self.holds.pop(s.session, None)
        for kind, name, _ in s.names():
            if kind is Subject.SESSION and name in self.holds and s.op is not Op.HOLD:
                self.holds[name] = True

    def _record_group(self, s: Step, i: int) -> None:
        """The overlap group `s` is in, and the model where it began."""
        if s.group is None:
            self.run = self.base = None
            return
        run = self.run_of(s.group)
        if run is None:
            self.base = self.copy()
            self.base.run = self.base.base = None  # checked against ungrouped steps only
            self.groups_seen.add(s.group)
            self.run = run = GroupRun(s.group, i)
        run.doubled = run.doubled or s.thread in run.threads
        run.threads.add(s.thread)
        for kind, name, makes in group_names(s):
            run.named.setdefault((kind, name), (i, s.op, makes))
        if is_lifecycle(s.op):
            run.registers.append(s.library or "*")
        if s.op is Op.UPLOAD and s.value is not None:
            run.uploads.add(s.value)
        if SPECS[s.op].needs_registration:
            run.needs.append((i, s.op, self.step_profiles(s)))


def group_names(s: Step) -> list[tuple[str, str, bool]]:
    """(kind, name, made here) of `Step.names`, and a register's or unregister's library."""
    out = [(str(kind), name, made) for kind, name, made in s.names()]
    if is_lifecycle(s.op):
        out.append(("library", s.library or "*", SPECS[s.op].effect is Effect.MAKES))
    return out


def is_lifecycle(op: Op) -> bool:
    """`register` and `unregister`: the steps whose subject is a library's registration."""
    return SPECS[op].subject is Subject.LIBRARY
