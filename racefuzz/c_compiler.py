"""Compiling C (or C++) files into a shared library: racefuzz's own helpers
(`execute.native_build`), the targets' forwarding libraries (`targets.forwarding`) and the EP-ABI
validation layer (`targets.layer`) are built this way on first use, with whatever compiler the
machine has (`CC`, else cc, gcc or clang; for C++ `CXX`, else c++, g++ or clang++).
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
    source: Path | Sequence[Path],
    target: Path,
    includes: Sequence[Path] = (),
    libs: Sequence[str] = ("dl",),
) -> bool:
    """Compile C files, or C++17 ones (`.cc`), into one shared library at `target` (atomically:
    another process may be building it too), with header folders `includes`, linked with
    `libs`. False where there is no compiler or it failed."""
    sources = [source] if isinstance(source, Path) else list(source)
    cxx = any(s.suffix == ".cc" for s in sources)
    choices = ("CXX", "c++", "g++", "clang++") if cxx else ("CC", "cc", "gcc", "clang")
    compiler = next(
        (c for c in (os.environ.get(choices[0], ""), *choices[1:]) if c and shutil.which(c)),
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
                *(["-std=c++17"] if cxx else []),
                *(f"-I{folder}" for folder in includes),
                "-o",
                str(tmp),
                *(str(s) for s in sources),
                *(f"-l{lib}" for lib in libs),
            ],
            capture_output=True,
            timeout=300,
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
