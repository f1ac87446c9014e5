"""Running an EP library built with a sanitizer: which runtime to preload, with which options.

An EP built with `-fsanitize=address` or `-fsanitize=thread` needs the sanitizer's runtime in
the process before anything else, and the Python that loads it is not instrumented: the runtime
must be `LD_PRELOAD`ed into the worker (a `dlopen` comes too late, and a fork of a zygote that
started without it cannot add it). The runtime is found from the compiler (`$CC`, else gcc,
cc, clang: `-print-file-name=libasan.so`), as the EP was most likely built with it.

Options, chosen so that one report ends the run and the supervisor reads it from stderr:
- both: `halt_on_error=1`, `exitcode=66`, symbolized stacks, `DEBUGINFOD_URLS` emptied (a
  symbolizer must never wait on the network);
- ASan: `detect_leaks=0` (the worker skips interpreter teardown on purpose, and Python's own
  allocations at exit are not the EP's leaks);
- TSan: `ignore_noninstrumented_modules=1` (accesses made by interceptors called from ORT or
  Python, which TSan cannot order, are not reported) and the suppressions file shipped in
  `racefuzz/data/tsan.supp`; no thread-leak or signal-unsafety reports (the worker exits with
  `os._exit`, and faulthandler's signal handler is Python's, not the EP's).

What this module does not do: parse the reports (`sanitizer_report`) or start processes.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from racefuzz.errors import RacefuzzError

# The names a racefuzz.toml says -> the finding kind their reports become.
KINDS: dict[str, str] = {"address": "asan", "thread": "tsan"}
_RUNTIMES = {"address": "libasan.so", "thread": "libtsan.so"}
# ASan intercepts __cxa_throw by looking it up when it starts; in Python, which does not link
# the C++ runtime, that lookup fails and the first C++ exception (ORT reporting any error)
# aborts with "CHECK failed: ... real___cxa_throw" (google/sanitizers#934). Preloading the
# C++ runtime after ASan's makes the lookup succeed.
_ALSO_PRELOADED = {"address": ("libstdc++.so",), "thread": ()}
_OPTIONS_VAR = {"address": "ASAN_OPTIONS", "thread": "TSAN_OPTIONS"}
EXIT_CODE = 66  # what a sanitizer exits with after its report (TSan's own default)
SUPPRESSIONS = Path(__file__).resolve().parent.parent / "data" / "tsan.supp"


def check_name(name: object) -> str:
    """`name` if it is a sanitizer racefuzz runs, else one error line."""
    if not isinstance(name, str) or name not in KINDS:
        known = ", ".join(f"'{k}'" for k in KINDS)
        raise RacefuzzError(f"sanitizer must be one of {known}, not {name!r}")
    return name


def of_libraries(sanitizers: Iterable[str | None]) -> str | None:
    """The one sanitizer a process needs for these libraries (None: none)."""
    found = sorted({s for s in sanitizers if s is not None})
    if len(found) > 1:
        # Two sanitizer runtimes cannot share a process.
        raise RacefuzzError(f"libraries built with different sanitizers ({', '.join(found)})")
    return found[0] if found else None


def _compilers() -> list[list[str]]:
    cc = os.environ.get("CC", "").strip()
    found = [shlex.split(cc)] if cc else []
    return found + [[name] for name in ("gcc", "cc", "clang") if shutil.which(name)]


def runtime(sanitizer: str) -> Path:
    """The shared runtime of `sanitizer`, as the compiler names it; one error line if none."""
    return _compiler_file(_RUNTIMES[sanitizer], f"the {sanitizer} sanitizer runtime")


def preload(sanitizer: str) -> str:
    """The `LD_PRELOAD` value: the runtime first, then what it needs beside it."""
    needs = _ALSO_PRELOADED[sanitizer]
    extra = [_compiler_file(name, "the C++ runtime ASan needs") for name in needs]
    return ":".join(str(p) for p in (runtime(sanitizer), *extra))


@functools.cache
def _compiler_file(name: str, what: str) -> Path:
    for compiler in _compilers():
        try:
            out = subprocess.run(
                [*compiler, f"-print-file-name={name}"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        # A compiler without the runtime echoes the bare name back.
        if os.path.isabs(out) and os.path.isfile(out):
            return Path(os.path.realpath(out))
    raise RacefuzzError(
        f"cannot find {what} ({name}): no compiler ($CC, gcc, cc, clang) knows it; install it "
        f"(e.g. the {name.removesuffix('.so')} package of your gcc)"
    )


def available(sanitizer: str) -> bool:
    try:
        runtime(sanitizer)
    except RacefuzzError:
        return False
    return True


def options(sanitizer: str, suppressions: str | None = None) -> str:
    """The `ASAN_OPTIONS` / `TSAN_OPTIONS` value (`suppressions`: the file's path, TSan only)."""
    # Every frame names its module, so that the EP's own frames can be told apart (ASan's
    # default shows the module only for frames without debug information).
    common = [
        "halt_on_error=1",
        f"exitcode={EXIT_CODE}",
        "symbolize=1",
        "stack_trace_format='    #%n %p in %f %S (%m+%o)'",
    ]
    if sanitizer == "address":
        return ":".join([*common, "detect_leaks=0", "abort_on_error=0"])
    supp = suppressions if suppressions is not None else str(SUPPRESSIONS)
    return ":".join(
        [
            *common,
            "ignore_noninstrumented_modules=1",
            "report_thread_leaks=0",
            "report_signal_unsafe=0",
            f"suppressions={supp}",
        ]
    )


def env(sanitizer: str | None, suppressions: str | None = None) -> dict[str, str]:
    """What a process that loads libraries built with `sanitizer` adds to its environment."""
    if sanitizer is None:
        return {}
    return {
        "LD_PRELOAD": preload(sanitizer),
        _OPTIONS_VAR[sanitizer]: options(sanitizer, suppressions),
        "DEBUGINFOD_URLS": "",
    }


def merged(base: Mapping[str, str], sanitizer: str | None) -> dict[str, str]:
    """`base` (a target's environment) with the sanitizer's settings over it."""
    return {**base, **env(sanitizer)}
