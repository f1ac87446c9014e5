"""Writing a text file so that a reader (or a crash of racefuzz) never sees half of it.

A temporary file beside the target, then an atomic rename. Opened with plain `open`, so the
file gets the user's usual permissions (`tempfile.mkstemp` would leave results readable by
their owner alone).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
