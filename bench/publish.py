"""What every results file of a bench starts and ends with: when it was measured under what load,
and writing it (and showing it)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path


def moment() -> tuple[str, float]:
    """(the UTC time now, the 1-minute load average): load is part of every figure."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]


def publish(path: Path, lines: Sequence[str]) -> int:
    """Write `lines` to `path`, print them, and return the exit code 0."""
    text = "\n".join(lines)
    path.write_text(text, encoding="utf-8")
    print(text)
    return 0
