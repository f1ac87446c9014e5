"""ORT's API contract: which schedules an application may legally run at all.

A well-formed schedule (`schedule.problems`) can still break a rule that ORT's C API states and
does not check. A crash that follows is the application's fault, not the EP's, so racefuzz does
not generate such schedules by default (`--allow-misuse` does), and labels any finding that
comes after a breach `misuse`: shown apart, never counted as an EP bug.

The rules, from `onnxruntime_c_api.h` (ORT 1.31):

- `UnregisterExecutionProviderLibrary`: "You MUST ensure there are no Session instances using
  execution providers created by the library before calling this function." Device values
  allocated through the library's allocators (`alloc`) are made by the library as well: freeing
  one after the library is gone calls into unloaded code. So an `unregister` of a library is a
  breach while a session on one of its profiles, or a value allocated with one, is alive
  (teardown frees what the schedule left alive, after its last step).
- `OrtEpDevice`s and memory infos of a library are invalid once it is unregistered. The worker
  looks them up afresh for every step, and `problems()` already forbids using a library's
  devices while it is not registered or while a step of the same overlap group unregisters it.

Everything else a schedule can express (concurrent session creation, runs of one session from
several threads, copies beside runs) is allowed by ORT's documentation: sessions and
`CopyTensors` are documented as thread-safe, so a failure there is the EP's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import LIVE_KINDS, SPECS, Effect, Subject

LibraryOf = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Breach:
    step: int  # the step that breaks the contract
    rule: str  # one line, e.g. "unregister of nxrt while session s1 (nxrt) is alive"


def needs(key: str, library: str | None) -> bool:
    """Whether something on `library` depends on the registration `key` ("*": every library)."""
    return library is not None and (key == "*" or library in (key, "*"))


def breaches(schedule: Schedule, library_of: LibraryOf | None = None) -> list[Breach]:
    """Every step that breaks ORT's contract, in order; [] for a legal schedule.

    `library_of` maps a profile to its EP library (None: ORT's own EP, which no unregister
    touches). Without it every profile is taken to need the library.
    """

    def lib(profile: str) -> str | None:
        return library_of(profile) if library_of is not None else "*"

    alive: dict[tuple[str, str], str] = {}  # (kind, name) -> profile
    # Steps of an overlap group run in any order: a release beside an unregister may come
    # after it, so a grouped unregister is judged against what was alive when the group began.
    at_group_start: dict[tuple[str, str], str] = {}
    out: list[Breach] = []
    for i, s in enumerate(schedule.steps):
        if s.group is not None and (i == 0 or schedule.steps[i - 1].group != s.group):
            at_group_start = dict(alive)
        spec = SPECS[s.op]
        subject = getattr(s, spec.subject.value) if spec.subject in LIVE_KINDS else None
        if subject and spec.effect is Effect.MAKES:
            made_on = schedule.step_profile(i)
            if made_on:
                alive[(spec.subject.value, subject)] = made_on
        elif subject and spec.effect is Effect.ENDS:
            alive.pop((spec.subject.value, subject), None)
        elif spec.subject is Subject.LIBRARY and spec.effect is Effect.ENDS:
            key = s.library or "*"
            users = [
                f"{kind} {name} ({profile})"
                for (kind, name), profile in (
                    alive | at_group_start if s.group is not None else alive
                ).items()
                if needs(key, lib(profile))
            ]
            if users:
                what = "every library" if key == "*" else key
                out.append(Breach(i, f"unregister of {what} while {', '.join(users)} alive"))
    return out


def first_breach(schedule: Schedule, library_of: LibraryOf | None = None) -> Breach | None:
    found = breaches(schedule, library_of)
    return found[0] if found else None


def is_legal(schedule: Schedule, library_of: LibraryOf | None = None) -> bool:
    return not breaches(schedule, library_of)
