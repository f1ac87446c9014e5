"""Typed identities: what a finding's cluster is, where a shrink stopped, where a cluster stands.

A `ClusterKey` is the root-cause identity findings are grouped by. Its `str()` is the text that
campaign folders, known-issues files and bundles store (`crash|SIGSEGV|run`,
`misuse|overlap|copy+run`), unchanged from the releases that stored strings, and `parse` reads
that text back; logic compares keys and their fields, never the text.

Stdlib only: `repro.py` embeds this module, so that a replay is judged by the same key.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

OVERLAP = "overlap"  # the kind of a key under a target's `cluster_by = "overlap"`
_MISUSE = "misuse"


@dataclass(frozen=True, order=True)
class ClusterKey:
    """kind: a finding kind, or OVERLAP; op: the op (a crash's faulting op or the ops in flight,
    an overlap's shape such as "copy+run"); message: the normalised message (a crash's signal);
    misuse: found at or after a breach of ORT's API contract."""

    kind: str
    op: str = ""
    message: str = ""
    misuse: bool = False

    def __str__(self) -> str:
        if self.kind == OVERLAP:
            text = f"{OVERLAP}|{self.op}"
        elif self.kind == "crash":
            text = f"crash|{self.message}|{self.op}"
        elif self.kind in ("asan", "tsan"):
            text = f"{self.kind}|{self.message}"
        elif self.kind in ("hang", "leak"):
            text = f"{self.kind}|{self.op}"
        else:
            text = f"{self.kind}|{self.op}|{self.message}"
        return f"{_MISUSE}|{text}" if self.misuse else text

    @staticmethod
    def parse(text: str) -> ClusterKey:
        """The key whose `str()` is `text` (as stored by this or an earlier release)."""
        misuse = text.startswith(_MISUSE + "|")
        body = text[len(_MISUSE) + 1 :] if misuse else text
        kind, _, rest = body.partition("|")
        if kind == OVERLAP or kind in ("hang", "leak"):
            return ClusterKey(kind, op=rest, misuse=misuse)
        if kind in ("asan", "tsan"):
            return ClusterKey(kind, message=rest, misuse=misuse)
        if kind == "crash":
            message, _, op = rest.partition("|")  # a signal or "exit code N": no bar in it
            return ClusterKey(kind, op=op, message=message, misuse=misuse)
        op, _, message = rest.partition("|")  # the message last: it may hold a bar
        return ClusterKey(kind, op=op, message=message, misuse=misuse)

    @property
    def shape(self) -> frozenset[str]:
        """The kinds of call of an overlap key ("copy+run" -> {copy, run}); empty otherwise."""
        return frozenset(self.op.split("+")) if self.kind == OVERLAP and self.op else frozenset()

    def as_misuse(self, misuse: bool) -> ClusterKey:
        return replace(self, misuse=misuse)


def shows(cluster: ClusterKey, symptom: ClusterKey | None, found: ClusterKey, shape: str) -> bool:
    """Whether a finding is evidence of `cluster`, whose failure looked like `symptom`: the one
    rule by which the shrinker, the campaign and repro.py count a replay. `found` is the
    finding's key without overlap clustering (`Finding.symptom_key`), `shape` the kinds of
    call of the overlap group before it ("" for none).

    A cluster of no overlap wants its key, whatever overlapped before: under overlap clustering
    it is a symptom that fails with no overlap, or fails alone (`AloneUnderOverlap`), and no
    race of an overlap's own. An overlap cluster wants a
    failure after an overlap of its kinds of call or fewer of them (the alloc in
    `[create || alloc || run]` was a bystander of the create-run race), never with no overlap,
    and, when `symptom` pins it, with the cluster's own symptom: the webgpu shrink that took
    any failure after an overlap drifted onto a placement error that fails alone."""
    if cluster.kind != OVERLAP:
        return found == cluster
    if found.misuse != cluster.misuse or not shape:
        return False
    if symptom is not None and not same_symptom(found, symptom):
        return False
    return frozenset(shape.split("+")) <= cluster.shape


# Kinds whose op is the steps in flight when the worker ended (a crash on no Python thread).
_IN_FLIGHT_KINDS = ("crash", "hang", "leak")


def same_symptom(found: ClusterKey, symptom: ClusterKey) -> bool:
    """Whether `found` is the failure `symptom` pins. A crash's op is its faulting step's, or
    every step in flight when no step's thread faulted, and which thread faults in a race is
    chance: webgpu's run-run race is `crash|SIGSEGV|run` in one replay and `...|run+run_bound`
    in the next. So for these kinds the signal must match and the ops share one; a crash in
    an op of none of them (a register that crashes alone) is another failure."""
    if found.kind == symptom.kind and found.kind in _IN_FLIGHT_KINDS:
        ops = set(found.op.split("+")) & set(symptom.op.split("+"))
        return (found.message, found.misuse) == (symptom.message, symptom.misuse) and bool(ops)
    return found == symptom


class ShrinkStop(StrEnum):
    """Why a shrink ended (stored in a bundle's shrink statistics as the value)."""

    DONE = "done"  # a full round of passes changed nothing: 1-minimal
    STALL = "stall"  # too many candidates in a row led nowhere
    BUDGET = "budget"  # the time budget ran out
    NOT_REPRODUCED = "not reproduced"  # the starting schedule did not fail again

    def describe(self) -> str:
        return {
            ShrinkStop.DONE: "1-minimal: no single step can go",
            ShrinkStop.STALL: "stopped after many candidates in a row led nowhere",
            ShrinkStop.BUDGET: "stopped when its time budget ran out, before it was 1-minimal",
            ShrinkStop.NOT_REPRODUCED: "the schedule it started from did not fail again",
        }[self]


class ClusterState(StrEnum):
    """Where a campaign's cluster stands. The value is the head of the cluster's state line in
    dashboards, summaries and findings.json (`FindingRecord.state` adds the rate and notes)."""

    NEW = "new"
    SHRINKING = "shrinking"
    SHRUNK = "shrunk"
    NOT_REPRODUCED = "not reproduced"
    NOT_SHRUNK = "not shrunk"
    INTERRUPTED = "not shrunk (interrupted)"
    TIME_UP = "not shrunk (time is up)"
    KNOWN = "known issue (not shrunk)"

    def describe(self, reproduction: tuple[int, int] | None = None) -> str:
        """The state with its measured rate: "shrunk, reproduced 9/10", "not reproduced (0/20)"."""
        if reproduction is None:
            return self.value
        k, n = reproduction
        if self is ClusterState.SHRUNK:
            return f"shrunk, reproduced {k}/{n}"
        if self is ClusterState.NOT_REPRODUCED:
            return (
                f"not reproduced ({k}/{n})"
                if n
                else "not reproduced (its budget ran out before any replay)"
            )
        return self.value

    @staticmethod
    def read(text: str) -> ClusterState:
        """The state a findings.json entry's state line starts with: the one place that reads
        that text, for folders whose entries (written before `status` was stored) have no
        other record of it."""
        heads = sorted(ClusterState, key=lambda c: len(c.value), reverse=True)
        return next((c for c in heads if text.startswith(c.value)), ClusterState.NEW)
