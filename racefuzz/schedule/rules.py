"""The rules a schedule keeps, walked once: `Checker`, and the `Problem`s it finds.

Three sets of rules (`Rules`), each a flag of a `RuleSet`:

- `WELL_FORMED`: what `racefuzz.schedule.model.problems` reports, that is what any schedule must
  keep to run at all: fields, threads and jitter, the library lifecycle, live sessions and values,
  and overlap groups (one consecutive run on distinct threads, no step of which needs another).
- `CONTRACT`: ORT's API contract (`racefuzz.schedule.contract` says which rules and why). A
  breach is misuse, never an EP defect; its text is what `Finding.misuse` stores, so it must not
  change.
- `GENERATOR`: what generation adds (`racefuzz.strategies.base.State`): only what the space
  (`Bounds`) offers, an op of ORT's own EP still waits for some library (so that a schedule is
  well-formed without the target's library map too, as `loads()` checks it), no register or
  unregister beside any step that needs registration, and each step of a group must also fit
  the state where the group began: steps released together may run in any order.

A `Checker` keeps the model of what a prefix leaves behind (`racefuzz.schedule.prefix`). That
model depends on the steps alone, never on the rule set, so one walk can be asked under any rule
set (`check`, `accepts`), and a generator may record steps before it knows its space.
`check_schedule` walks a whole schedule and lists its problems in report order: well-formedness
(each step's, then each group's), the contract, then the generator's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import Protocol

from racefuzz.schedule.contract_rules import (
    CONTRACT_RULES,
    LibraryOf,
    Problem,
    contract_problems,
)
from racefuzz.schedule.contract_rules import at as _at
from racefuzz.schedule.op_table import NAME_FIELDS, SPECS, Op, Subject, maker
from racefuzz.schedule.prefix import Prefix, Schedule, Step, group_names, is_lifecycle

MAX_JITTER_US = 100_000
# A step's dims: at most this many, each in 1..MAX_DIM (big enough for size-dependent kernels).
MAX_DIMS, MAX_DIM = 4, 4096


class Rules(Flag):
    WELL_FORMED = auto()
    CONTRACT = auto()
    GENERATOR = auto()


# Every rule's stable id, by set.
_WELL_FORMED_RULES = [
    "threads",
    "thread",
    "jitter",
    "dims",
    "takes-no-field",
    "needs-field",
    "unknown-mode",
    "register-while-registered",
    "unregister-while-unregistered",
    "library-not-registered",
    "before-create",
    "alive-session",
    "alive-value",
    "unknown-session",
    "unknown-value",
    "group-split",
    "group-thread",
    "overlap-name",
    "overlap-first-create",
    "overlap-lifecycle",
]
_GENERATOR_RULES = [
    "op-not-offered",
    "profile-not-offered",
    "model-not-offered",
    "library-not-offered",
    "unregister-under-all",
    "register-again",
    "needs-any-library",
    "group-lifecycle",
    "group-start",
]
RULE_SETS: Mapping[str, Rules] = {
    **dict.fromkeys(_WELL_FORMED_RULES, Rules.WELL_FORMED),
    **dict.fromkeys(CONTRACT_RULES, Rules.CONTRACT),
    **dict.fromkeys(_GENERATOR_RULES, Rules.GENERATOR),
}
# Group rules are reported after every step's, group by group, in the order they are listed here.
# Overlap rules (2 and up) are one step's, ordered by step and then by rank.
_GROUP_RANK = {
    "group-split": 0,
    "group-thread": 1,
    "overlap-name": 2,
    "overlap-first-create": 3,
    "overlap-lifecycle": 4,
}


class Bounds(Protocol):
    """What generation may use; a `racefuzz.strategies.space.Space` is one."""

    @property
    def ops(self) -> frozenset[Op]: ...
    @property
    def profiles(self) -> tuple[str, ...]: ...
    @property
    def models(self) -> tuple[str, ...]: ...
    @property
    def lifecycle(self) -> bool: ...
    def library_keys(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class RuleSet:
    """Which rules to check, and what they need: `library_of` maps a profile to the EP library it
    needs (None for ORT's own EPs; without a map any registration satisfies any profile, and the
    contract takes every profile to need every library); `bounds` for the generator's rules."""

    rules: Rules = Rules.WELL_FORMED
    library_of: LibraryOf | None = None
    bounds: Bounds | None = None
    # `rules` as booleans: generation asks for every candidate step, and a Flag test is slow.
    sets: tuple[bool, bool, bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if Rules.GENERATOR in self.rules and self.bounds is None:
            raise ValueError("the generator's rules need bounds")
        rules = self.rules
        sets = (Rules.WELL_FORMED in rules, Rules.CONTRACT in rules, Rules.GENERATOR in rules)
        object.__setattr__(self, "sets", sets)


class Checker:
    """Walks a schedule's steps in order under `rules`; `found` holds every problem pushed."""

    def __init__(self, threads: int, rules: RuleSet | None = None) -> None:
        self.threads = threads
        self.rules = rules if rules is not None else RuleSet()
        self.found: list[Problem] = []
        self._model = Prefix()
        if Rules.WELL_FORMED in self.rules.rules and threads < 1:
            text = f"threads must be at least 1, not {threads}"
            self.found.append(Problem(None, "threads", text))

    def check(self, step: Step, rules: RuleSet | None = None) -> list[Problem]:
        """The problems `step` would add as the next step; nothing changes."""
        return list(_problems(self._model, self.threads, step, step.group, rules or self.rules))

    def accepts(self, step: Step, rules: RuleSet | None = None) -> bool:
        """Whether `step` would add no problem (stops at the first it finds)."""
        found = _problems(self._model, self.threads, step, step.group, rules or self.rules)
        return next(found, None) is None

    def push(self, step: Step) -> list[Problem]:
        """Check `step` under `rules`, then take it as the next step."""
        new = self.check(step)
        self.record(step)
        self.found += new
        return new

    def record(self, step: Step) -> None:
        """Take `step` as the next step without checking it."""
        self._model.record(step)

    def finish(self) -> list[Problem]:
        """Problems that only the end of a schedule shows, added to `found`: none today
        (teardown frees what is left alive, which ORT allows); a walk calls it all the same."""
        return []

    def copy(self) -> Checker:
        out = Checker(self.threads, self.rules)
        out.found, out._model = list(self.found), self._model.copy()
        return out

    def alive(self, kind: Subject) -> AbstractSet[str]:
        """The live sessions or values (read only)."""
        return self._model.alive[kind]


def check_schedule(schedule: Schedule, rules: RuleSet | None = None) -> list[Problem]:
    """Every problem of `schedule` under `rules` (well-formedness alone by default), in report
    order; [] when it has none."""
    checker = Checker(schedule.threads, rules)
    start_of: list[int] = []  # where the group of each step began (at itself, if in none)
    for k, step in enumerate(schedule.steps):
        checker.push(step)
        run = checker._model.run
        start_of.append(run.start if run is not None else k)
    checker.finish()

    def order(p: Problem) -> tuple[int, ...]:
        rank = _GROUP_RANK.get(p.rule)
        if rank is None or p.step is None:
            return (0 if RULE_SETS[p.rule] is Rules.WELL_FORMED else 2, RULE_SETS[p.rule].value)
        return (1, start_of[p.step], min(rank, 2), p.step, rank)

    return sorted(checker.found, key=order)  # stable: each step's own in the order found


# --- the rules ---------------------------------------------------------------------------------


def _problems(
    m: Prefix, threads: int, s: Step, group: int | None, rs: RuleSet
) -> Iterator[Problem]:
    """The problems `s` adds as step `m.count` in `group` (its own, or None to check it as if
    alone), lazily: `accepts` stops at the first."""
    i, (well_formed, contract, generator) = m.count, rs.sets
    if well_formed:
        yield from _well_formed(m, threads, s, i, rs.library_of)
        if group is not None:
            yield from _overlaps(m, s, i, group, rs.library_of)
    if contract:
        yield from contract_problems(m, s, i, group, rs.library_of)
    if generator:
        yield from _generator(m, threads, s, i, group, rs)


def _well_formed(
    m: Prefix, threads: int, s: Step, i: int, library_of: LibraryOf | None
) -> Iterator[Problem]:
    spec = SPECS[s.op]
    if not 0 <= s.thread < threads:
        yield _at(i, "thread", f"thread {s.thread} is outside 0..{threads - 1}")
    if not 0 <= s.jitter_us <= MAX_JITTER_US:
        yield _at(i, "jitter", f"jitter_us must be within 0..{MAX_JITTER_US}")
    if s.dims and not spec.sized:
        yield _at(i, "takes-no-field", f"'{s.op}' takes no 'dims' (it feeds no inputs)")
    elif len(s.dims) > MAX_DIMS or not all(1 <= d <= MAX_DIM for d in s.dims):
        yield _at(i, "dims", f"dims: at most {MAX_DIMS}, each within 1..{MAX_DIM}")
    fields, required = spec.fields, spec.required
    for name in NAME_FIELDS:
        if getattr(s, name) is None:
            if name in required:
                yield _at(i, "needs-field", f"'{s.op}' needs a '{name}'")
        elif name not in fields:
            yield _at(i, "takes-no-field", f"'{s.op}' takes no '{name}'")
    if s.mode is not None and spec.modes and s.mode not in spec.modes:
        modes = ", ".join(spec.modes)
        yield _at(i, "unknown-mode", f"'{s.op}' has no mode '{s.mode}' (one of {modes})")
    # The backbone: the library lifecycle.
    key, registered = s.library or "*", m.registered
    if s.op is Op.REGISTER and (key in registered or "*" in registered):
        yield _at(i, "register-while-registered", f"'register' of {key} while it is registered")
    elif s.op is Op.UNREGISTER and key not in registered and "*" not in registered:
        yield _at(
            i, "unregister-while-unregistered", f"'unregister' of {key} while it is not registered"
        )
    if spec.needs_registration:
        for profile in m.step_profiles(s):
            if not _is_registered(registered, library_of, profile):
                text = f"'{s.op}' while the EP library of '{profile}' is not registered"
                yield _at(i, "library-not-registered", text)
    if spec.needs_earlier_create and not m.created_any:
        yield _at(i, "before-create", f"'{s.op}' before any 'create' (no backend chosen yet)")
    made: tuple[Subject, str] | None = None  # by this step, for a later name of it (one at most)
    for kind, name, makes in s.names():
        alive = name in m.alive[kind] or (kind, name) == made
        if makes:
            if alive:
                yield _at(i, f"alive-{kind}", f"'{s.op}' of {kind} '{name}' that is alive")
            made = (kind, name)
        elif not alive:
            text = f"'{s.op}' of {kind} '{name}' before its '{maker(kind).op}'"
            yield _at(i, f"unknown-{kind}", text)


def _is_registered(registered: set[str], library_of: LibraryOf | None, profile: str | None) -> bool:
    if library_of is None or profile is None:
        return bool(registered)
    lib = library_of(profile)
    return lib is None or "*" in registered or lib in registered


def _overlaps(
    m: Prefix, s: Step, i: int, g: int, library_of: LibraryOf | None
) -> Iterator[Problem]:
    """Steps of one group are released together and may run in any order, so none may depend
    on another: no use of a session or value that a step of the group makes (or a make of one
    that a step of the group uses), no copy or alloc beside the schedule's first `create`, no
    step beside the `register` or `unregister` of the library it needs (ORT's contract: a
    library is not unregistered while sessions on it are being built)."""
    run, spec = m.run_of(g), SPECS[s.op]
    start = run.start if run is not None else i
    if run is None and g in m.groups_seen:
        yield _at(i, "group-split", f"group {g} is not one consecutive run of steps")
    if run is not None and s.thread in run.threads and not run.doubled:
        yield _at(start, "group-thread", f"group {g} has two steps on one thread")
    named = run.named if run is not None else {}
    for kind, name, makes in group_names(s):
        earlier = named.get((kind, name))
        if earlier is not None and (earlier[2] or makes):
            text = f"'{s.op}' of {kind} '{name}' overlaps step {earlier[0]} ('{earlier[1]}')"
            yield _at(i, "overlap-name", f"{text} in group {g}")
    if spec.needs_earlier_create and m.first_create is not None and start <= m.first_create < i:
        yield _at(i, "overlap-first-create", f"'{s.op}' overlaps the first 'create' in group {g}")
    registers = run.registers if run is not None else []
    needing = [(i, s.op, m.step_profiles(s))] if spec.needs_registration else []
    if is_lifecycle(s.op):
        # Order within a group is moot: the steps before this one that need its library.
        registers, before = [*registers, s.library or "*"], registers
        needing = [n for n in (run.needs if run else []) if not _clash(n[2], before, library_of)]
    for k, op, profiles in needing:
        if _clash(profiles, registers, library_of):
            text = f"'{op}' overlaps a register/unregister it needs in group {g}"
            yield _at(k, "overlap-lifecycle", text)


def _clash(
    profiles: Sequence[str | None], registers: Sequence[str], library_of: LibraryOf | None
) -> bool:
    """Whether one of `profiles` needs a library that `registers` touch. Without the target's
    map, which library a profile needs is unknown: let it be."""
    if not registers or library_of is None:
        return False
    libs = [library_of(p) for p in profiles if p]
    return any(
        lib is not None and ("*" in registers or lib in registers or lib == "*") for lib in libs
    )


def _generator(
    m: Prefix, threads: int, s: Step, i: int, group: int | None, rs: RuleSet
) -> Iterator[Problem]:
    """What generation adds to the other two sets (assumed checked too)."""
    bounds, spec = rs.bounds, SPECS[s.op]
    assert bounds is not None
    lifecycle_op, run = spec.subject is Subject.LIBRARY, m.run_of(group)
    if run is not None:
        assert m.base is not None
        first = next(_problems(m.base, threads, s, None, rs), None)
        if first is not None:
            yield _at(i, "group-start", f"where group {group} began, {first.detail}")
        # Stricter than the overlap rule (any library, not just the one needed): simple, enough.
        if (run.registers or lifecycle_op) and (run.needs or spec.needs_registration):
            text = f"'{s.op}' in group {group} beside a register or unregister"
            yield _at(i, "group-lifecycle", text + " and a step that needs one")
    if lifecycle_op:
        key = s.library or "*"
        if key not in bounds.library_keys():
            yield _at(i, "library-not-offered", f"the space has no library {key}")
        lifecycle = bounds.lifecycle and s.op in bounds.ops
        if s.op is Op.UNREGISTER:
            if key not in m.registered and "*" in m.registered:
                text = f"'unregister' of {key}, which only a register of every library made"
                yield _at(i, "unregister-under-all", text)
            if not lifecycle:
                yield _at(i, "op-not-offered", "the space has no mid-schedule 'unregister'")
        elif key in m.ever_registered and not lifecycle:
            yield _at(i, "register-again", f"'register' of {key} again, without lifecycle")
        return
    if s.op not in bounds.ops:
        yield _at(i, "op-not-offered", f"the space has no '{s.op}'")
    if "profile" in spec.fields and s.profile not in bounds.profiles:
        yield _at(i, "profile-not-offered", f"the space has no profile '{s.profile}'")
    if "model" in spec.fields and s.model not in bounds.models:
        yield _at(i, "model-not-offered", f"the space has no model '{s.model}'")
    # Even on ORT's own EP: what `loads()` checks, without the target's map, needs it.
    if spec.needs_registration and not m.registered:
        yield _at(i, "needs-any-library", f"'{s.op}' before any library is registered")
