"""Compiling one C file into a shared library: racefuzz's own helpers (`execute.native_build`)
and the targets' forwarding libraries (`targets.forwarding`) are built this way on first use,
with whatever C compiler the machine has (`CC`, else cc, gcc or clang).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path


def compile_shared(
    source: Path, target: Path, includes: Sequence[Path] = (), libs: Sequence[str] = ("dl",)
) -> bool:
    """Compile one C file into a shared library at `target` (atomically: another process may be
    building it too), with header folders `includes`, linked with `libs`. False where there is
    no compiler or it failed."""
    compiler = next(
        (c for c in (os.environ.get("CC", ""), "cc", "gcc", "clang") if c and shutil.which(c)),
        None,
    )
    if compiler is None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}")
    try:
        built = subprocess.run(
            [
                compiler,
                "-shared",
                "-fPIC",
                "-O1",
                *(f"-I{folder}" for folder in includes),
                "-o",
                str(tmp),
                str(source),
                *(f"-l{lib}" for lib in libs),
            ],
            capture_output=True,
            timeout=120,
        )
        if built.returncode != 0:
            return False
        os.replace(tmp, target)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return True
