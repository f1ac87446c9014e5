"""Where racefuzz keeps what it builds once: `$RACEFUZZ_CACHE`, else `~/.cache/racefuzz`.

Stdlib only: worker processes import it through `models`.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("RACEFUZZ_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "racefuzz"
