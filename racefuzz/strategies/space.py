"""The space a target offers the generators: profiles, models, EP libraries, limits and toggles.

A `Space` is all a strategy knows about a target: names and limits. It maps each profile to the EP
library that must be registered before the profile can be used, and it says which op kinds and
features (overlap groups, jitter, mid-schedule unregister) generation may use. Swarm testing
narrows it per schedule with `dataclasses.replace`.

It does not know whether a target can actually run a profile or model (that is `doctor`'s job),
and it knows nothing of ORT.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from racefuzz.errors import RacefuzzError
from racefuzz.schedule import contract
from racefuzz.schedule.model import Op, Schedule
from racefuzz.schedule.op_table import LAYER_OPS, REQUIRED_OPS
from racefuzz.schedule.rules import RULE_SETS, Rules, RuleSet, check_schedule
from racefuzz.targets.model import Target
from racefuzz.targets.models import has_symbolic_dims

# The registration key of the one unnamed library: `problems()` reads "*" as "every library",
# which is exactly what a `register` step without a library name does.
UNNAMED = "*"


@dataclass(frozen=True)
class Space:
    profiles: tuple[str, ...]
    models: tuple[str, ...]  # the first is the smallest; generators prefer it
    libraries: tuple[str, ...] = ()  # empty: one unnamed library, steps carry library=None
    # profile -> the library it needs, None for ORT's own EPs. With no named libraries a profile
    # left out needs the unnamed one; with named libraries every profile must be listed.
    library_of: Mapping[str, str | None] = field(default_factory=dict)
    max_threads: int = 4
    max_steps: int = 24
    ops: frozenset[Op] = frozenset(Op) - LAYER_OPS  # hold/resume: a layered target only
    # Alive at once, as walks keep it; PCT's reordering and mutation may go a little over.
    max_sessions: int = 4
    max_values: int = 2  # device values alive at once
    lifecycle: bool = True  # unregister and re-register may appear mid-schedule
    # Schedules outside ORT's API contract (`schedule.contract`), e.g. an unregister while a
    # session on the library is alive: only when a user asks for them.
    allow_misuse: bool = False
    groups: bool = True  # overlap groups may be generated
    jitter: bool = True  # rare short sleeps may be generated
    # Runs may size the models' symbolic dims (a step's `dims`): only where a model has some.
    dims: bool = False

    def __post_init__(self) -> None:
        if not self.profiles:
            raise RacefuzzError("space: at least one profile is needed")
        if not self.models:
            raise RacefuzzError("space: at least one model is needed")
        for label, names in (("profile", self.profiles), ("model", self.models)):
            for name in names:
                if names.count(name) > 1:
                    raise RacefuzzError(f"space: {label} '{name}' is listed twice")
        for profile in self.profiles:
            lib = self.library_of.get(profile)
            if self.libraries and profile not in self.library_of:
                raise RacefuzzError(f"space: profile '{profile}' has no entry in library_of")
            if lib is not None and lib not in self.libraries:
                if not self.libraries:
                    raise RacefuzzError(
                        f"space: profile '{profile}' needs library '{lib}' but no libraries "
                        "are named (one unnamed library)"
                    )
                raise RacefuzzError(
                    f"space: profile '{profile}' needs library '{lib}' that is not one of "
                    f"{', '.join(self.libraries)}"
                )
        for label, value, least in (
            ("max_threads", self.max_threads, 1),
            ("max_steps", self.max_steps, 1),
            ("max_sessions", self.max_sessions, 1),
            ("max_values", self.max_values, 0),
        ):
            if value < least:
                raise RacefuzzError(f"space: {label} must be at least {least}, not {value}")
        if not self.ops >= REQUIRED_OPS:
            raise RacefuzzError("space: ops must include register and create")

    def library_keys(self) -> tuple[str, ...]:
        """The registration keys generation may register: the libraries, or the unnamed one."""
        return self.libraries or (UNNAMED,)

    def library_for(self, profile: str) -> str | None:
        """The key that must be registered before `profile` is used; None when nothing must be.

        Suits `problems(schedule, space.library_for)`: the unnamed library is "*".
        """
        if profile in self.library_of:
            return self.library_of[profile]
        return None if self.libraries else UNNAMED

    def problems(self, schedule: Schedule) -> list[str]:
        """`problems()` with this space's libraries, and names the space does not have.

        The check every generated schedule passes, and replay's strict one; unless the space
        allows misuse, a breach of ORT's contract is a problem too.
        """
        sets = Rules.WELL_FORMED if self.allow_misuse else Rules.WELL_FORMED | Rules.CONTRACT
        out = [
            f"{p} (outside ORT's contract)" if RULE_SETS[p.rule] is Rules.CONTRACT else str(p)
            for p in check_schedule(schedule, RuleSet(sets, self.library_for))
        ]
        for i, s in enumerate(schedule.steps):
            if s.profile is not None and s.profile not in self.profiles:
                out.append(
                    f"step {i}: profile '{s.profile}' is not one of {', '.join(self.profiles)}"
                )
            if s.model is not None and s.model not in self.models:
                out.append(f"step {i}: model '{s.model}' is not one of {', '.join(self.models)}")
            if s.library is not None and s.library not in self.libraries:
                known = ", ".join(self.libraries) or "none (one unnamed library)"
                out.append(f"step {i}: library '{s.library}' is not one of {known}")
        return out

    def breaches(self, schedule: Schedule) -> list[contract.Breach]:
        return contract.breaches(schedule, self.library_for)

    def generator_rules(self) -> RuleSet:
        """What generation checks each step with (`strategies.base.State.allows`): every rule
        set, the contract left out where the space allows misuse."""
        sets = Rules.WELL_FORMED | Rules.GENERATOR
        if not self.allow_misuse:
            sets |= Rules.CONTRACT
        return RuleSet(sets, self.library_for, self)


def space_for(
    target: Target,
    max_steps: int,
    max_threads: int,
    lifecycle: bool = True,
    allow_misuse: bool = False,
) -> Space:
    libraries = tuple(lib.name for lib in target.libraries)
    names = target.profile_names()
    library_of: dict[str, str | None] = {}
    for p in names:
        lib = target.library_of(p)
        if lib is None or len(libraries) > 1:
            library_of[p] = lib
    return Space(
        profiles=names,
        models=target.models,
        libraries=libraries if len(libraries) > 1 else (),
        library_of=library_of,
        max_steps=max_steps,
        max_threads=max_threads,
        lifecycle=lifecycle,
        allow_misuse=allow_misuse,
        ops=frozenset(Op) if target.layer else frozenset(Op) - LAYER_OPS,
        dims=any(has_symbolic_dims(m) for m in target.models),
    )
