"""A worker dies with the process that started it (Linux): no kill of racefuzz, however rough
(SIGKILL of the campaign or of a zygote), leaves a worker running on its own, perhaps forever in
a hung EP."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGKILL when `parent` (the pid that started this process) ends."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it ended before the request above: nobody to report to
        os._exit(1)


def exit_when_orphaned(before: Callable[[], None] = lambda: None) -> None:
    """Exit once the process that started this one is gone, even while blocked (a hung EP, a
    wait for a child): `before` runs first. For long-lived helpers, where PR_SET_PDEATHSIG
    does not fit: it follows the parent's thread that started us, which may end long before
    racefuzz does (a job slot's thread; a Ray actor's)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        before()
        os._exit(1)

    threading.Thread(target=watch, name="racefuzz-orphan-watch", daemon=True).start()
