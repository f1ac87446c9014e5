"""Room kept on the output disk, so that a campaign that fills it can still write its summary.

A campaign writes a small ballast file into its folder when it starts. When a write under the
folder fails for lack of space, the campaign stops and releases the ballast: the summary, the
findings list and the finding that was being saved then fit in the space it held.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from racefuzz.errors import RacefuzzError

RESERVE_BYTES = 512 * 1024  # summary.md and findings.json of hundreds of clusters


class Reserve:
    def __init__(self, folder: Path, size: int = RESERVE_BYTES) -> None:
        self.path = folder / ".reserve"
        try:
            with self.path.open("wb") as f:
                f.write(b"\0" * size)  # written, not sparse: the blocks are really taken
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            self.path.unlink(missing_ok=True)
            raise RacefuzzError(
                f"cannot write results under '{folder}': {e.strerror} "
                f"(racefuzz needs at least {size // 1024} KiB free there)"
            ) from None

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)
