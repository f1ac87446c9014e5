"""What one run of a schedule did: per-step outcomes, how the worker ended, and the findings.

The worker streams `StepOutcome`s as steps finish; the executor adds how the process ended
(clean, crash, hang) and what was in flight; the oracles turn all of it into `Finding`s. Every
value here is frozen and JSON-friendly, because results cross process boundaries and land in
reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from racefuzz.judge.identity import OVERLAP, ClusterKey
from racefuzz.schedule.model import Schedule
from racefuzz.worker.protocol import Skip


class Check(StrEnum):
    """What the worker's own comparison said about a step's data."""

    OK = "ok"
    ZEROED = "zeroed"  # all zeros where the CPU reference is not
    MISMATCH = "mismatch"  # differs from the CPU reference beyond tolerance
    CORRUPT = "corrupt-copy"  # a copy round trip changed bytes
    MISPLACED = "misplaced"  # a device value on another device than the profile's


class Exit(StrEnum):
    CLEAN = "clean"  # every step ran (some may have raised: that is an outcome, not an exit)
    CRASH = "crash"  # died by a signal or an abnormal exit code
    HANG = "hang"  # no progress within the step timeout; killed
    LEAK = "leak"  # the worker's memory passed the limit; killed
    # Killed by a signal no EP code raises (SIGKILL, SIGTERM, ...) that racefuzz did not send:
    # a user, a CI timeout, the OOM killer. Not a finding: the run tells nothing about the EP.
    KILLED = "killed"


@dataclass(frozen=True)
class StepOutcome:
    step: int
    ok: bool
    message: str = ""  # the exception text when not ok
    check: Check | None = None  # None for steps that produce no data
    detail: str = ""  # e.g. "max |diff| 3.2 at [0, 4]", or why the step was skipped
    ms: float = 0.0
    skipped: str = ""  # a `Skip` value (worker/protocol.py) when the step did not run, else ""

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> StepOutcome:
        """An outcome as `asdict` wrote it (run.json). The one place old JSON is converted: in
        a run.json of the previous release, which had no `skipped`, a skipped step's detail
        reads "skipped: <reason>"; it loads as `skipped`, with the reason alone as detail."""
        known = {f.name for f in fields(StepOutcome)}
        o = {k: v for k, v in d.items() if k in known}
        o["check"] = Check(o["check"]) if o.get("check") else None
        detail = str(o.get("detail", ""))
        reason = detail.removeprefix(_OLD_SKIPPED)
        if "skipped" not in d and reason != detail:
            o["detail"], o["skipped"] = reason, _old_skip(reason)
        return StepOutcome(**o)


_OLD_SKIPPED = "skipped: "


def _old_skip(reason: str) -> str:
    """The `Skip` of an old run.json's reason, by the words the worker wrote then."""
    if reason.endswith(("was not created", "was not allocated", "was not made")):
        return Skip.MISSING.value
    if "no C compiler" in reason:
        return Skip.NO_COMPILER.value
    if reason.endswith(("is another EP configuration", "takes no output of it")):
        return Skip.UNFIT.value
    return Skip.UNSUPPORTED.value  # no streams, host memory, no pool thread for run_async


# Shorter error messages ("Fail", "invalid argument") say too little to call two ops' errors
# one defect.
MIN_DEFECT_MESSAGE = 24
# What is put before an EP's status by the call it failed in, not by the EP: the worker's
# run_async callback ("RunAsync: "), onnxruntime's binding calls ("Error when bind input: ").
_CALL_CONTEXT = re.compile(r"^(RunAsync|Error when bind (input|output)):\s*")


def ep_words(message: str) -> str:
    """A normalised error message without what the failing call put before the EP's status."""
    return _CALL_CONTEXT.sub("", message)


# How the EP-ABI layer names the tensor a check was about (racefuzz/layer/checks.cc).
ABI_ROLES = ("the source ", "the destination ", "an input ")


@dataclass(frozen=True)
class Finding:
    """One thing that went wrong, with the signature used to deduplicate it.

    `message` is normalised (numbers and addresses stripped) so that two runs of one bug share a
    signature; `raw` keeps the original text for the report.
    """

    kind: str  # error | crash | hang | zeroed | mismatch | corrupt-copy | misplaced | misroute
    # | leak | asan | tsan (a sanitizer's report; `message`: its type and frames in the EP)
    op: str
    message: str
    profiles: tuple[str, ...]
    step: int | None = None
    raw: str = ""
    # "interleaving" (its session alone is fine), "alone" (fails alone too), or "" (unknown)
    origin: str = ""
    # For crashes: the op the faulting thread was in (`oracles.crash_state`), "" when unknown.
    crash_state: str = ""
    # The ORT contract rule the schedule broke before this went wrong (`schedule.contract`);
    # '' for a legal schedule. A misuse finding is the application's fault, not the EP's.
    misuse: str = ""
    # Under a target's `cluster_by = "overlap"`: the kinds of call in the last overlap group at
    # or before the finding (e.g. "run", "copy+create"), its whole cluster identity; "" otherwise.
    overlap: str = ""
    # For crashes: the innermost frame of the faulting thread's native stack inside an EP
    # library (`oracles.ep_frame`), "" when unknown. Not part of the key: it tells which ops'
    # clusters are one defect reached several ways (`defect`).
    frame: str = ""

    @property
    def defect(self) -> tuple[str, ...] | None:
        """What stays the same when one defect is reached through several ops, or None where
        nothing does: a crash's signal and its innermost EP frame (one faulting helper behind
        run, copy and feed), an error's EP message (one failing helper's status). Clusters of
        one defect are duplicates of the first (`CampaignState`)."""
        if self.kind == "crash" and self.frame:
            return ("crash", self.message, self.frame, str(bool(self.misuse)))
        words = ep_words(self.message)
        if self.kind == "error" and len(words) >= MIN_DEFECT_MESSAGE:
            return ("error", words, str(bool(self.misuse)))
        if self.kind == "abi":
            # The layer's rule and what broke it, whichever tensor of the call it was: one
            # shared allocator feeding a copy's source and its destination is one defect.
            check, _, what = self.message.partition(": ")
            for role in ABI_ROLES:
                what = what.removeprefix(role)
            return ("abi", check, what, str(bool(self.misuse)))
        return None

    @property
    def signature(self) -> str:
        """Everything that tells this finding apart, in-flight ops and profiles included."""
        return f"{self.kind}|{self.op}|{','.join(self.profiles)}|{self.message}"

    @property
    def key(self) -> ClusterKey:
        """The root-cause identity findings are grouped by (as ClusterFuzz groups crashes by
        crash state): a crash by its signal and the faulting thread's state, a hang or leak by
        the ops in flight, anything else by kind, op and message; under overlap clustering, by
        the overlap group's shape alone. Profiles are left out: one bug shows on several
        profiles. A misuse never shares a cluster with an EP bug."""
        misuse = bool(self.misuse)
        if self.overlap:
            return ClusterKey(OVERLAP, op=self.overlap, misuse=misuse)
        if self.kind == "crash":
            return ClusterKey("crash", self.crash_state or self.op, self.message, misuse)
        if self.kind in ("asan", "tsan"):  # the report's type and EP frames say it all
            return ClusterKey(self.kind, message=self.message, misuse=misuse)
        if self.kind in ("hang", "leak"):
            return ClusterKey(self.kind, op=self.op, misuse=misuse)
        return ClusterKey(self.kind, self.op, self.message, misuse)

    @property
    def cluster(self) -> str:
        """`key` as stored in campaign folders, known-issues files and bundles."""
        return str(self.key)

    @property
    def symptom_key(self) -> ClusterKey:
        """The key this finding would have without overlap clustering."""
        return replace(self, overlap="").key if self.overlap else self.key

    @property
    def symptom(self) -> str:
        return str(self.symptom_key)

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", f"{self.kind} {self.op} {self.message}".lower())
        return words.strip("-")[:60].rstrip("-")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["signature"] = self.signature
        d["cluster"] = self.cluster
        d["symptom"] = self.symptom  # the failure an overlap cluster's replays must show
        return d


@dataclass(frozen=True)
class RunResult:
    schedule: Schedule
    outcomes: tuple[StepOutcome, ...]
    exit: Exit
    returncode: int | None = None
    signal: str | None = None  # e.g. "SIGSEGV"
    in_flight: tuple[int, ...] = ()  # steps started and not finished when the worker died
    stacks: str = ""  # faulthandler's dump of every thread, when there was one
    stderr_tail: str = ""
    trace: tuple[dict[str, Any], ...] = ()  # testbed trace lines, when tracing was on
    sanitizer_reports: tuple[str, ...] = ()  # ASan/TSan reports the worker wrote to stderr
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    findings: tuple[Finding, ...] = field(default=())
    # Where it ran, on a Ray fleet (`racefuzz.fleet`): the node and the device kind; "" locally.
    node: str = ""
    device: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.findings)

    def placed_at(self, finding: Finding) -> int:
        """The step a finding is placed at: its own, or for one between steps (a worker killed
        by an EP's own thread, no step in flight) the last step that finished."""
        if finding.step is not None:
            return finding.step
        return max((o.step for o in self.outcomes), default=0)

    def outcome(self, step: int) -> StepOutcome | None:
        for o in self.outcomes:
            if o.step == step:
                return o
        return None
