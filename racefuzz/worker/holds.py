"""Scheduling points: the EP-ABI layer's holds, driven from the worker through ctypes.

A `hold sN [point]` step arms a point of the layer (`racefuzz/layer/holds.h`) for session sN;
the next thread of sN to reach it parks there. The sequencer sees the park (`parked`), lets the
schedule go on, and a `resume sN` step (or the end of the schedule, or a later step that needs
the parked thread) releases it. Only a layered target has the points: the layer library ORT
loaded exports them, and loading that same path here gives the same instance.

Stdlib only: `repro.py` embeds this file's source.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

LAYER_FILE = "libracefuzz_layer.so"
# What tells the layer which schedule session an EP belongs to (read in its CreateEp).
SESSION_CONFIG_KEY = "racefuzz.session"


class LayerHolds:
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        self._arm = lib.RacefuzzLayer_Arm
        self._arm.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self._arm.restype = ctypes.c_int
        self._parked = lib.RacefuzzLayer_Parked
        self._parked.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._parked.restype = ctypes.c_size_t
        self._resume = lib.RacefuzzLayer_Resume
        self._resume.argtypes = [ctypes.c_char_p]
        self._resume.restype = None
        self._buffer = ctypes.create_string_buffer(4096)

    def arm(self, session: str, point: str) -> bool:
        return bool(self._arm(session.encode(), point.encode()) == 0)

    def parked(self) -> Counter[str]:
        """Sessions with a thread parked now, each as often as it has parked threads."""
        needed = self._parked(self._buffer, len(self._buffer))
        if needed >= len(self._buffer):
            self._buffer = ctypes.create_string_buffer(needed + 1)
            self._parked(self._buffer, len(self._buffer))
        text = self._buffer.value.decode()
        return Counter(text.split(",")) if text else Counter()

    def resume(self, session: str | None) -> None:
        """Release the threads parked for `session` (None: every one) and disarm its points."""
        self._resume(None if session is None else session.encode())


def find(library_paths: Iterable[str]) -> LayerHolds | None:
    """The layer among the registered libraries, or None when the target has no layer."""
    for path in library_paths:
        if Path(path).name == LAYER_FILE:
            return LayerHolds(path)
    return None
