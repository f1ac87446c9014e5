"""What one run of a schedule did: per-step outcomes, how the worker ended, and the findings.

The worker streams `StepOutcome`s as steps finish; the executor adds how the process ended
(clean, crash, hang) and what was in flight; the oracles turn all of it into `Finding`s. Every
value here is frozen and JSON-friendly, because results cross process boundaries and land in
reports.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from racefuzz.schedule.model import Schedule


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
    detail: str = ""  # e.g. "max |diff| 3.2 at [0, 4]"
    ms: float = 0.0


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

    @property
    def signature(self) -> str:
        """Everything that tells this finding apart, in-flight ops and profiles included."""
        return f"{self.kind}|{self.op}|{','.join(self.profiles)}|{self.message}"

    @property
    def cluster(self) -> str:
        """The root-cause identity findings are grouped by (as ClusterFuzz groups crashes by
        crash state): a crash by its signal and the faulting thread's state, a hang or leak by
        the ops in flight, anything else by kind, op and message; under overlap clustering, by
        the overlap group's shape alone. Profiles are left out: one bug shows on several
        profiles. A misuse never shares a cluster with an EP bug."""
        if self.overlap:
            key = f"overlap|{self.overlap}"
        elif self.kind == "crash":
            key = f"crash|{self.message}|{self.crash_state or self.op}"
        elif self.kind in ("asan", "tsan"):
            key = f"{self.kind}|{self.message}"  # the report's type and EP frames say it all
        elif self.kind in ("hang", "leak"):
            key = f"{self.kind}|{self.op}"
        else:
            key = f"{self.kind}|{self.op}|{self.message}"
        return f"misuse|{key}" if self.misuse else key

    @property
    def symptom(self) -> str:
        """The cluster this finding would have without overlap clustering."""
        return replace(self, overlap="").cluster if self.overlap else self.cluster

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", f"{self.kind} {self.op} {self.message}".lower())
        return words.strip("-")[:60].rstrip("-")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["signature"] = self.signature
        d["cluster"] = self.cluster
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


def shape_in(key: str) -> str:
    """The overlap group's shape in a cluster key under overlap clustering, "" in any other
    key or signature: `overlap|copy+run` and `misuse|overlap|copy+run` give `copy+run`."""
    for prefix in ("overlap|", "misuse|overlap|"):
        if key.startswith(prefix):
            return key.removeprefix(prefix)
    return ""
