"""Where a command writes: checked before any work, so a bad `--out` costs one line, not minutes.

`racefuzz shrink` used to find an `--out` that is a file only when the bundle was written, after
the shrink's work, and then as a traceback; `racefuzz run` checked the folder but not whether it
could write there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from racefuzz.errors import RacefuzzError


def check_writable(flag: str, folder: Path) -> None:
    """One line unless files can be written at `folder` (made later, where missing): it is no
    file, and the nearest folder that exists on its path takes a new file. Nothing is left."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = f"'{folder}'" if existing == folder.absolute() else f"'{folder}' (at '{existing}')"
        raise RacefuzzError(f"{flag} {what} is a file, not a folder")
    try:
        # Root passes os.access checks on read-only folders; a real write does not lie.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise RacefuzzError(f"cannot write results under {flag} '{folder}': {e.strerror}") from None
