"""What an op table entry is: `OpSpec`, the subjects and effects it names, and the check of a
whole table (`check_specs`). The table itself, and the `Op` enum it is keyed by, are
`racefuzz.schedule.op_table`, whose docstring says what follows from an entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

# The op enum a table is keyed by (`op_table.Op`); generic so that this module needs no import
# of the table that is made of its entries.
Op = TypeVar("Op", bound=StrEnum)


class Subject(StrEnum):
    """What an op's main name field names; the value is that field's name. The order is the
    order in which `enabled_steps` proposes ops by subject."""

    LIBRARY = "library"
    SESSION = "session"
    PROFILE = "profile"
    VALUE = "value"


class Effect(StrEnum):
    MAKES = "makes"  # the name is fresh before and alive after
    USES = "uses"  # alive before and after (or, for a profile, just a name of the space)
    ENDS = "ends"  # alive before, gone after


# Fields a step may carry beyond thread, op, group and jitter_us, in JSON order.
NAME_FIELDS = ("library", "session", "profile", "model", "value", "mode", "peer")
# The kinds of thing a schedule makes, keeps alive and ends: sessions and device values.
LIVE_KINDS = (Subject.SESSION, Subject.VALUE)
# Fresh names of made sessions and values: s1, s2, ... and v1, v2, ...
PREFIX: Mapping[Subject, str] = {Subject.SESSION: "s", Subject.VALUE: "v"}


@dataclass(frozen=True)
class OpSpec(Generic[Op]):
    """One op: the fields it takes, what it does to its subject, and how it is generated."""

    op: Op
    doc: str  # the call it makes, one line
    subject: Subject
    effect: Effect
    takes: tuple[str, ...]  # name fields besides mode and peer; the subject's field among them
    optional: frozenset[str] = frozenset()  # of `takes`, those that may be None
    peer: Subject | None = None  # what `peer` names (a session or a value); None: no peer
    modes: tuple[str, ...] = ()  # allowed `mode` values; none: the op takes no mode
    mode_required: bool = False  # else None (the plain op) is allowed too
    # How often a random step of this op takes each mode, relative to the plain op's 1.0 (a mode
    # not listed: 1.0), so that a new mode need not make the plain op rarer.
    mode_weights: Mapping[str, float] = field(default_factory=dict)
    # Device memory is found through the library's OrtEpDevice, which unregistering destroys.
    needs_registration: bool = False
    # Env-level device memory only has a backend once some session picked one (the seed's
    # OGA creates its session first).
    needs_earlier_create: bool = False
    weight: float = 1.0  # how often a random step is of this op, before `enabled_steps` narrows
    essential: bool = False  # swarm testing never drops it (without it nothing happens)
    # `racefuzz doctor` runs it on each profile and model, after `create s1`: it may name s1
    # or the profile, nothing else.
    doctor: bool = False
    # Random overlap groups sometimes put it beside a step of one of these ops on the same
    # subject (a `terminate` beside the run it is to stop).
    beside: frozenset[Op] = frozenset()
    # The kind of call it counts as in an overlap's shape (`cluster_by = "overlap"`): ops that
    # reach the device the same way race the same way ("": its own name).
    race_as: str = ""
    # Its EP work runs on a thread of ORT's own (run_async completes on the intra-op pool): a
    # crash on a thread with no Python frame while it is in flight is its crash.
    on_ort_thread: bool = False
    # It feeds a session fresh random inputs, so a step may size the model's symbolic dims.
    sized: bool = False
    fields: frozenset[str] = field(init=False)  # every name field it takes (mode, peer too)
    required: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        extra = {"peer"} if self.peer else set()
        extra |= {"mode"} if self.modes else set()
        fields = frozenset(self.takes) | extra
        optional = self.optional | ({"mode"} if self.modes and not self.mode_required else set())
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "required", fields - optional)

    @property
    def race_kind(self) -> str:
        return self.race_as or self.op.value

    def mode_weight(self, mode: str | None) -> float:
        return 1.0 if mode is None else self.mode_weights.get(mode, 1.0)

    @property
    def mode_choices(self) -> tuple[str | None, ...]:
        """The modes a generator may give it: None first where the plain op is allowed."""
        return self.modes if self.mode_required else (None, *self.modes)

    def makes(self, kind: Subject) -> bool:
        return self.subject is kind and self.effect is Effect.MAKES

    def names(self, kind: Subject) -> bool:
        """Whether its subject is a live `kind` it uses or ends (not one it makes)."""
        return self.subject is kind and self.effect is not Effect.MAKES


def check_specs(specs: Mapping[Op, OpSpec[Op]], ops: Iterable[Op]) -> list[str]:
    """Every inconsistency of a table keyed by `ops`, one line each; [] for a good one."""
    out = [f"op '{op}' has no entry" for op in ops if op not in specs]
    for op, s in specs.items():
        if s.op is not op:
            out.append(f"entry of '{op}' is for '{s.op}'")
        if s.subject.value not in s.takes:
            out.append(f"'{op}' does not take its subject's field '{s.subject}'")
        unknown = (set(s.takes) - set(NAME_FIELDS)) | ({"mode", "peer"} & set(s.takes))
        out += [f"'{op}' takes unknown field '{f}'" for f in sorted(unknown)]
        if s.peer not in (None, Subject.SESSION, Subject.VALUE):
            out.append(f"'{op}': a peer names a session or a value, not a {s.peer}")
        if s.mode_required and not s.modes:
            out.append(f"'{op}' requires a mode but lists none")
        if s.doctor and (s.peer or s.subject in (Subject.VALUE, Subject.LIBRARY)):
            out.append(f"'{op}': doctor runs ops on a session or a profile only")
        if any(specs[b].subject is not s.subject for b in s.beside if b in specs):
            out.append(f"'{op}' is put beside an op of another subject")
        if s.weight <= 0:
            out.append(f"'{op}' has weight {s.weight}: it would never be generated")
        out += [
            f"'{op}' weighs mode '{m}' it does not list" for m in s.mode_weights if m not in s.modes
        ]
        out += [f"'{op}' mode '{m}' has weight {w}" for m, w in s.mode_weights.items() if w <= 0]
    for kind in (Subject.SESSION, Subject.VALUE):
        if any(s.names(kind) or s.peer is kind for s in specs.values()) and not any(
            s.makes(kind) for s in specs.values()
        ):
            out.append(f"no op makes a {kind}")
    return out
