"""Native frames in crash reports: building the worker's crash tracer and naming its frames.

`tracer_library()` is `native/crashtrace.c` (a few dozen lines of C) as `native_build`
compiles it; None where there is no C compiler (or not on Linux): crash reports then show
Python stacks only, as before. The worker loads it after faulthandler
(`racefuzz.worker.native_trace`).

`symbolize(stderr)` rewrites the frames the tracer printed (`<object>+0x<offset>`) with function
names and source lines from `addr2line` (binutils), run here, after the worker died. Where
addr2line is missing or knows nothing, a frame keeps its object, offset and nearest symbol.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from racefuzz.execute import native_build
from racefuzz.judge.oracles import NATIVE_HEADER

HEADER = NATIVE_HEADER  # what crashtrace.c prints first; the oracles read the frames after it
_FRAME = re.compile(r"^  #(\d+) (\S+)\+0x([0-9a-f]+)(?: \((.*)\))?$", re.M)


def tracer_library() -> Path | None:
    """The compiled crash tracer, built on first use; None where it cannot be."""
    return native_build.library("crashtrace")


def symbolize(text: str) -> str:
    """`text` with each tracer frame named by addr2line where it can be."""
    frames = list(_FRAME.finditer(text))
    if not frames or shutil.which("addr2line") is None:
        return text
    by_object: dict[str, list[int]] = {}
    for m in frames:
        # A return address points after its call: look up the byte before it (frame 0 faulted
        # at its own address).
        offset = int(m.group(3), 16) - (1 if m.group(1) != "0" else 0)
        by_object.setdefault(m.group(2), []).append(max(offset, 0))
    names: dict[tuple[str, int], str] = {}
    for obj, offsets in by_object.items():
        names.update(_addr2line(obj, sorted(set(offsets))))
    out, last = [], 0
    for m in frames:
        offset = int(m.group(3), 16) - (1 if m.group(1) != "0" else 0)
        name = names.get((m.group(2), max(offset, 0)))
        if name is None:
            continue
        hint = f"{Path(m.group(2)).name}+0x{m.group(3)}"
        out += [text[last : m.start()], f"  #{m.group(1)} {name} ({hint})"]
        last = m.end()
    return "".join([*out, text[last:]])


def has_symbol_table(path: Path) -> bool:
    """Whether an ELF file kept its `.symtab` (not stripped). In a stripped library addr2line
    names every frame after the nearest exported symbol, which would mislead: such frames keep
    their offsets only."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return True  # not 64-bit little-endian ELF: let addr2line decide
            shoff = int.from_bytes(head[0x28:0x30], "little")
            shentsize = int.from_bytes(head[0x3A:0x3C], "little")
            shstrndx = int.from_bytes(head[0x3E:0x40], "little")
            f.seek(shoff + shstrndx * shentsize)
            names = f.read(shentsize)
            f.seek(int.from_bytes(names[0x18:0x20], "little"))
            return b".symtab\0" in f.read(int.from_bytes(names[0x20:0x28], "little"))
    except (OSError, IndexError, ValueError):
        return False


def _addr2line(obj: str, offsets: list[int]) -> dict[tuple[str, int], str]:
    if not Path(obj).is_file() or not has_symbol_table(Path(obj)):
        return {}
    try:
        done = subprocess.run(
            ["addr2line", "-f", "-C", "-e", obj, *(hex(o) for o in offsets)],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2 * len(offsets):
        return {}
    found = {}
    for i, offset in enumerate(offsets):
        function, place = lines[2 * i], lines[2 * i + 1]
        if function == "??":
            continue
        source = Path(place.split(" ")[0]).name.removesuffix(":?").removesuffix(":0")
        where = "" if place.startswith("??") or not source else f" at {source}"
        found[(obj, offset)] = f"{function}{where}"
    return found
