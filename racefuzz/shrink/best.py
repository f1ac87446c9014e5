"""Where a shrink keeps its best schedule so far, and what that schedule was shrunk to show,
so that a campaign cut short (Ctrl-C, a lost machine) resumes the shrink instead of redoing it.
"""

from __future__ import annotations

from pathlib import Path

from racefuzz.atomic_file import write_text
from racefuzz.schedule.json_io import dumps, load
from racefuzz.schedule.model import Schedule, ScheduleError


def save(best_path: Path, signature: str, schedule: Schedule) -> None:
    # The signature first: a resumed shrink of the best must ask for what it was shrunk to
    # show (after the blame phase, an earlier group's cluster), or it will not reproduce.
    write_text(signature_path(best_path), signature)
    write_text(best_path, dumps(schedule))  # never seen half-written


def signature_path(best_path: Path) -> Path:
    """Where a shrink keeps the signature its best schedule (at `best_path`) shows."""
    return best_path.with_suffix(".signature")


def resumed_signature(best_path: Path | None, start: Schedule) -> str | None:
    """The signature a cut-short shrink was after when its best schedule was `start`; None when
    `start` is not that best (a fresh shrink) or nothing was saved."""
    if best_path is None:
        return None
    try:
        if load(best_path) != start:
            return None
        return signature_path(best_path).read_text(encoding="utf-8").strip() or None
    except (OSError, ScheduleError):
        return None
