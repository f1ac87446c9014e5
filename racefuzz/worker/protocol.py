"""What one step did, as the worker tells the parent: `StepResult`, and `Skip`, why a step did
not run at all.

A handler returns a `StepResult`; the worker sends it as the fields of its `done` event
(`to_json`), and the executor reads it back (`from_json`) into the judge's `StepOutcome`. Stdlib
only: `repro.py` embeds this file with the worker's other modules, on Python 3.10 or later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# The event a persistent worker (`persistent.py`) sends once it is clean again after a job.
SERVED = "served"


class Skip(StrEnum):
    """Why a step did not run. None of these is a finding."""

    MISSING = "missing"  # an earlier step did not make the session, value or peer it names
    # The EP or profile lacks what the op needs: no streams, host memory (nothing to share), no
    # intra-op pool thread for run_async.
    UNSUPPORTED = "unsupported"
    UNFIT = "unfit"  # a feed's peer cannot take the outputs (another EP configuration, shapes)
    NO_COMPILER = "no-compiler"  # this machine could not build racefuzz's native helper


@dataclass(frozen=True)
class StepResult:
    ok: bool = True
    message: str = ""  # the exception text when not ok
    # A value of racefuzz.judge.outcome.Check ("ok", "zeroed", "mismatch", "corrupt-copy",
    # "misplaced") for a step that compared data, else None; the executor checks it.
    check: str | None = None
    detail: str = ""  # e.g. "output 0: max |diff| 3.2 at [0, 4]", or why the step was skipped
    skipped: Skip | None = None  # the step did not run (see `detail` for the words)
    internal: str = ""  # racefuzz's own traceback: a racefuzz bug, never an EP finding

    @staticmethod
    def checked(check: str, detail: str = "") -> StepResult:
        return StepResult(check=check, detail=detail)

    @staticmethod
    def skip(why: Skip, detail: str) -> StepResult:
        return StepResult(skipped=why, detail=detail)

    @staticmethod
    def error(message: str, internal: str = "") -> StepResult:
        return StepResult(ok=False, message=message, internal=internal)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "check": self.check,
            "detail": self.detail,
            "skipped": self.skipped.value if self.skipped is not None else None,
            "internal": self.internal,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> StepResult:
        """From a `done` event (its other keys, `ev`, `step`, `ms`, are left alone)."""
        skipped = d.get("skipped")
        return StepResult(
            ok=bool(d.get("ok", False)),
            message=str(d.get("message") or ""),
            check=d.get("check") or None,
            detail=str(d.get("detail") or ""),
            skipped=Skip(skipped) if skipped else None,
            internal=str(d.get("internal") or ""),
        )
