"""The contract set of `racefuzz.schedule.rules`: ORT's API contract, step by step.

`racefuzz.schedule.contract` says which rules ORT states and why; this module checks them on
the model of a prefix (`racefuzz.schedule.prefix.Prefix`), for the one walk of `rules`. A
breach is misuse, never an EP defect; its text is what `Finding.misuse` stores, so it must not
change. `Problem` lives here so that both modules make them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from racefuzz.schedule.op_table import Op, Subject
from racefuzz.schedule.prefix import Prefix, Step

LibraryOf = Callable[[str], "str | None"]
# The contract's rule ids, in report order.
CONTRACT_RULES = (
    "unregister-in-use",
    "unordered-upload",
    "unordered-copy",
    "value-write-race",
    "release-in-use",
)


@dataclass(frozen=True)
class Problem:
    step: int | None  # None: the schedule as a whole
    rule: str  # a stable id, one of `RULE_SETS`
    text: str  # one line, `step N: ...` where it has a step

    def __str__(self) -> str:
        return self.text

    @property
    def detail(self) -> str:
        """The text without its `step N: ` prefix."""
        return self.text if self.step is None else self.text.removeprefix(f"step {self.step}: ")


def at(i: int, rule: str, text: str) -> Problem:
    return Problem(i, rule, f"step {i}: {text}")


def needs(key: str, library: str | None) -> bool:
    """Whether something on `library` depends on the registration `key` ("*": every library)."""
    return library is not None and (key == "*" or library in (key, "*"))


def contract_problems(
    m: Prefix, s: Step, i: int, group: int | None, library_of: LibraryOf | None
) -> Iterator[Problem]:
    """The contract's problems of `s` as step `i` in `group` (None: as if alone)."""
    if s.op is Op.UNREGISTER:
        yield from _unregister_in_use(m, s, i, group, library_of)
    if s.op is Op.HARD_RELEASE:
        yield from _release_in_use(m, s, i, group)
    if s.op is Op.COPY and s.mode == "stream_unordered":
        text = "copy [stream_unordered] reads back, with no stream, an upload on a sync stream"
        yield at(i, "unordered-copy", f"{text} that nothing has ordered before the read")
    yield from _kept_values(m, s, i, group)


def _release_in_use(m: Prefix, s: Step, i: int, group: int | None) -> Iterator[Problem]:
    """ReleaseSession while another thread is inside a call of the session: beside a step on it
    in one overlap group, or after a call of it that a hold parks inside ORT. (A plain `release`
    only drops Python's reference: a call in flight keeps the session alive, so it never is.)"""
    run, name = m.run_of(group), s.session or ""
    beside = run.named.get((Subject.SESSION, name)) if run is not None else None
    if beside is not None:
        text = f"hard_release of {name} beside '{beside[1]}' of it (step {beside[0]})"
        yield at(i, "release-in-use", f"{text}: ORT's contract forbids releasing a session in use")
    elif name in m.parked:
        text = f"hard_release of {name} while a call of it is parked inside ORT by a hold"
        yield at(i, "release-in-use", f"{text}: ORT's contract forbids releasing a session in use")


def _unregister_in_use(
    m: Prefix, s: Step, i: int, group: int | None, library_of: LibraryOf | None
) -> Iterator[Problem]:
    """An unregister while a session or value on one of the library's profiles is alive. Steps
    of a group run in any order: a release beside the unregister may come after it, so a grouped
    unregister is judged against what was alive when the group began as well."""
    key, pool = s.library or "*", m.in_use
    if m.run_of(group) is not None:
        assert m.base is not None
        pool = pool | m.base.in_use
    users = [
        f"{kind} {name} ({profile})"
        for (kind, name), profile in pool.items()
        if needs(key, library_of(profile) if library_of is not None else "*")
    ]
    if users:
        what = "every library" if key == "*" else key
        yield at(i, "unregister-in-use", f"unregister of {what} while {', '.join(users)} alive")


def _kept_values(m: Prefix, s: Step, i: int, group: int | None) -> Iterator[Problem]:
    """Kept values are the application's memory: writing one while another call of the same
    group reads or writes it is the application's own data race, and no call may read or write
    one whose upload on a stream nothing has ordered before it: ORT leaves a stream copy's order
    to the caller, Python cannot wait for a stream, and a copy without one does not wait for it
    on every EP (ORT's CUDA EP's streams are non-blocking), so only freeing it is left."""
    values = [name for kind, name, _ in s.names() if kind is Subject.VALUE]
    unordered = m.unordered | (m.base.unordered if group is not None and m.base else set())
    for name in values if s.op is not Op.FREE else ():
        if name in unordered:
            verb = "writes" if s.op is Op.UPLOAD else "reads"
            text = (
                f"{s.op} {verb} {name} while its upload on a sync stream is not ordered before it"
            )
            yield at(i, "unordered-upload", text)
    run = m.run_of(group)
    if run is None:
        return
    for name in values:
        beside = name in run.uploads or (s.op is Op.UPLOAD and ("value", name) in run.named)
        if beside:
            text = f"'{s.op}' of {name} beside an upload of it in group {group}"
            yield at(i, "value-write-race", f"{text} (the application's own data race)")
