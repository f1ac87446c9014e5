"""racefuzz's own small C libraries, compiled once into the cache on first use.

Each is one C file under `racefuzz/native/`, built with the C compiler the testbed needs anyway
into `<cache>/<name>/<hash of the source>/lib<name>.so`; None where there is none (or not on
Linux), and the feature that needs it does without. Looked up once per process: every worker
start asks.

- `crashtrace`: native frames of a crashing worker (`racefuzz.execute.native_stack`);
- `envapi`: an EP library with no EP, registered by the worker to reach ORT's C API for calls
  Python does not expose (`racefuzz.worker.env_api`).
"""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

from racefuzz.c_compiler import compile_shared
from racefuzz.cache import cache_root

NATIVE_DIR = Path(__file__).resolve().parent.parent / "native"
_lock = threading.Lock()
_built: dict[str, Path | None] = {}


def library(name: str) -> Path | None:
    """`native/<name>.c` compiled, built on first use; None where it cannot be."""
    with _lock:
        if name not in _built:
            _built[name] = _find_or_build(name)
        return _built[name]


def _find_or_build(name: str) -> Path | None:
    source = NATIVE_DIR / f"{name}.c"
    if not sys.platform.startswith("linux") or not source.is_file():
        return None
    key = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache_root() / name / key / f"libracefuzz_{name}.so"
    if target.is_file():
        return target
    return target if compile_shared(source, target) else None
