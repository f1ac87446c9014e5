"""Loads racefuzz's crash tracer into the worker (see `racefuzz.execute.native_stack`): on a fatal
signal the faulting thread's native frames go to stderr before faulthandler's Python stacks.
Installed after faulthandler, whose handler it then calls."""

from __future__ import annotations

import contextlib
import ctypes
import os

TRACER_ENV = "RACEFUZZ_CRASHTRACE"


def install() -> None:
    path = os.environ.get(TRACER_ENV)
    if not path:
        return
    with contextlib.suppress(OSError, AttributeError):  # else Python stacks alone, as before
        ctypes.CDLL(path).racefuzz_crashtrace_install()
