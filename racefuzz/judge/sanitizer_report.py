"""AddressSanitizer and ThreadSanitizer reports: found in a worker's stderr, summarised for a
signature.

A report's identity is its type (`data race`, `heap-use-after-free`, ...) and the top frame
inside the EP library of each stack that matters: for a data race both accesses (sorted, so
which thread came first does not split a cluster), for ASan the bad access and, when there is
one, the free or allocation behind it. Frames in ORT, Python, libc or the C++ library say where
the EP was called from, not what is wrong in it, so they are skipped; argument lists and
addresses are dropped so that two runs of one bug share the summary.

Only the standard library is used: `repro.py` embeds this module to judge its replays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_REPORT = re.compile(
    r"^(?:WARNING: ThreadSanitizer: |==\d+==ERROR: (?:Address|Thread)Sanitizer: )"
    r".*?^SUMMARY: (?:Address|Thread)Sanitizer:[^\n]*",
    re.M | re.S,
)
_TITLE = re.compile(r"(?:Address|Thread)Sanitizer: (.*)")
_FRAME = re.compile(r"^\s+#\d+ (?:0x[0-9a-fA-F]+ in )?(.*)$")
_MODULE = re.compile(r"\s+\(([^()]*?)(?:\+0x[0-9a-fA-F]+)?\)$")
_LOCATION = re.compile(r"\s+(?:\S+:\d+(?::\d+)?|<null>|\?\?:\d+)$")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_LIBRARY_CODE = re.compile(r"^(?:[^(<]*\s)?(?:std|__gnu_cxx|__cxxabiv1|__sanitizer)::|^operator ")
# Headers of the C++ library and compiler: their frames are inlined helpers, not the EP's code.
_SYSTEM_SOURCES = ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/")
# What a stack's header line says it is (the line just before its frames).
_FREED = re.compile(r"^\s*freed by thread", re.I)


def extract(stderr: str) -> tuple[str, ...]:
    """Every complete sanitizer report in `stderr`, in order, from its title to its SUMMARY."""
    return tuple(m.group(0) for m in _REPORT.finditer(stderr))


def kind(report: str) -> str:
    """The finding kind: `asan` or `tsan`."""
    return "asan" if "AddressSanitizer" in report.split("\n", 1)[0] else "tsan"


def bug_type(report: str) -> str:
    """`data race`, `heap-use-after-free`, `SEGV`, ... without addresses, pids or sizes."""
    m = _TITLE.search(report.split("\n", 1)[0])
    title = m.group(1) if m else "report"
    title = re.split(r" \(pid=| on (?:unknown )?address| at pc ", title)[0]
    return _HEX.sub("<addr>", title).strip()


def _stacks(report: str) -> list[tuple[str, list[str]]]:
    """(header line, frame texts) for every stack in the report, in order."""
    out: list[tuple[str, list[str]]] = []
    header, in_stack = "", False
    for line in report.splitlines():
        m = _FRAME.match(line)
        if m is None:
            in_stack = False
            header = line if line.strip() else header
            continue
        if not in_stack:
            out.append((header, []))
            in_stack = True
        out[-1][1].append(m.group(1))
    return out


def _function(frame: str) -> tuple[str, str, bool]:
    """(function without its argument list, module file name, whether it is standard library
    code inlined into the module) of one frame's text."""
    module = ""
    m = _MODULE.search(frame)
    if m is not None:
        module = m.group(1).rsplit("/", 1)[-1]
        frame = frame[: m.start()]
    where = _LOCATION.search(frame)
    system = where is not None and where.group(0).strip().startswith(_SYSTEM_SOURCES)
    frame = _LOCATION.sub("", frame).strip()
    name = frame.replace("(anonymous namespace)", "{anon}")
    name = re.sub(r"\s*\[clone [^\]]*\]", "", name)  # gcc's .isra/.constprop copies
    name = re.sub(r"\s+const$", "", name)
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = name.strip() or "?"
    return name, module, system or _LIBRARY_CODE.search(name) is not None


def _top_ep_frame(frames: Sequence[str], ep_modules: Sequence[str]) -> str:
    """The innermost frame in an EP library that is the EP's own code (not an inlined standard
    library helper); the innermost EP frame if all are helpers; '?' if none is in the EP."""
    in_ep = [
        (name, helper) for name, module, helper in map(_function, frames) if module in ep_modules
    ]
    own = [name for name, helper in in_ep if not helper]
    return (own or [name for name, _ in in_ep] or ["?"])[0]


def summary(report: str, ep_modules: Sequence[str]) -> str:
    """The report's identity: its type and the EP frames that matter."""
    what = bug_type(report)
    stacks = _stacks(report)
    if not stacks:
        return what
    if what == "data race" and len(stacks) >= 2:
        pair = sorted(_top_ep_frame(s, ep_modules) for _, s in stacks[:2])
        return f"{what}: {pair[0]} ~ {pair[1]}"
    text = f"{what}: {_top_ep_frame(stacks[0][1], ep_modules)}"
    freed = [s for header, s in stacks[1:] if _FREED.search(header)]
    if freed:
        text += f" (freed in {_top_ep_frame(freed[0], ep_modules)})"
    return text
