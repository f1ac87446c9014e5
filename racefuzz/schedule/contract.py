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

- A copy on a stream is asynchronous: ORT leaves ordering it to the caller (`CopyTensors`: "can
  be used to perform the copy asynchronously"), and Python has no call that waits for an
  `OrtSyncStream`; a copy without a stream does not wait for one either on every EP (ORT's CUDA
  EP's streams are non-blocking: its plain copy reads zeros or old bytes). So after an
  `upload [stream]` of a kept value every later call on it but `free` (a `bind` or `read` of it,
  another `upload`) breaks the contract, and `copy [stream_unordered]`, whose read back is not on
  the upload's stream, is a breach by itself.
- `ReleaseSession` (`hard_release`, the C API's release): a session must not be released while
  another thread is inside one of its calls, so a `hard_release` beside a step on the same
  session in one overlap group, or after a call of it that a `hold` parks inside ORT, is a
  breach. Values the session made are the application's: they may outlive it (ORT keeps the
  allocator they came from). A plain `release` only drops Python's reference, which a call in
  flight also holds, so it never breaks this rule.
- Kept values are the application's own memory: an `upload` of a value beside another call on
  it in one overlap group is the application's data race, not the EP's.

The rules (`unregister-in-use`, `unordered-upload`, `unordered-copy`, `value-write-race`,
`release-in-use`) are
`racefuzz.schedule.contract_rules`, checked by `racefuzz.schedule.rules`: the one walk that
generation, replay and shrinking check schedules with.

Everything else a schedule can express (concurrent session creation, runs of one session from
several threads, copies beside runs) is allowed by ORT's documentation: sessions and
`CopyTensors` are documented as thread-safe, so a failure there is the EP's.
"""

from __future__ import annotations

from dataclasses import dataclass

from racefuzz.schedule.contract_rules import LibraryOf
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.rules import Rules, RuleSet, check_schedule

__all__ = ["LibraryOf"]  # re-exported: the type of `library_of`, for callers passing one on


@dataclass(frozen=True)
class Breach:
    step: int  # the step that breaks the contract
    rule: str  # one line, e.g. "unregister of nxrt while session s1 (nxrt) is alive"


def breaches(schedule: Schedule, library_of: LibraryOf | None = None) -> list[Breach]:
    """Every step that breaks ORT's contract, in order; [] for a legal schedule.

    `library_of` maps a profile to its EP library (None: ORT's own EP, which no unregister
    touches). Without it every profile is taken to need the library. The rules are
    `racefuzz.schedule.rules`' contract set; `Finding.misuse` stores `step N: <rule>`.
    """
    found = check_schedule(schedule, RuleSet(Rules.CONTRACT, library_of))
    return [Breach(p.step, p.detail) for p in found if p.step is not None]


def first_breach(schedule: Schedule, library_of: LibraryOf | None = None) -> Breach | None:
    found = breaches(schedule, library_of)
    return found[0] if found else None


def is_legal(schedule: Schedule, library_of: LibraryOf | None = None) -> bool:
    return not breaches(schedule, library_of)
