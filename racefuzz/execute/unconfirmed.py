"""A finding that a persistent worker saw and no fresh worker showed again, kept on disk.

It may need what ran before it in that process (state an EP kept across sessions), or it may be
a rare race that the fresh tries missed: either way it is not reported as a cluster (its schedule
alone does not show it), and it is not dropped. Each is one JSON file in `unconfirmed/` of the
campaign's folder: the schedule, what was found, the worker's stderr tail, and the schedules that
ran before it in the same process, oldest first (run them in order, then it, in one process).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from racefuzz.atomic_file import write_text
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.json_io import to_json_obj

_lock = threading.Lock()  # two job slots must not take one number


def write_unconfirmed(folder: Path | None, result: RunResult, earlier: tuple[str, ...]) -> None:
    """One record in `folder` (None: the command keeps no folder; nothing is written)."""
    if folder is None:
        return
    record: dict[str, Any] = {
        "schedule": to_json_obj(result.schedule),
        "findings": [
            {"kind": f.kind, "op": f.op, "message": f.message, "step": f.step}
            for f in result.findings
        ],
        "stderr_tail": result.stderr_tail,
        "earlier_schedules": [json.loads(job)["schedule"] for job in earlier],
    }
    with _lock:
        folder.mkdir(parents=True, exist_ok=True)
        number = 1 + count(folder)
        write_text(folder / f"{number:04d}.json", json.dumps(record, indent=1) + "\n")


def count(folder: Path) -> int:
    return sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0
