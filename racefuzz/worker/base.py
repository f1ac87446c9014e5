"""What the worker's ops share: the profile as the worker sees it, the sessions and values a
schedule builds, the data checks, `Host` (what an op mixin may use of `Runtime`) and the test
that tells racefuzz's own bugs from what ORT and the EP do.

`ops.py` builds `Runtime` from the mixins in `handoff.py`, `runs.py` and `env_api.py`; they all
import this module and none imports another op module, so none waits on another's import.
Like them it imports only the stdlib, numpy and onnxruntime: `repro.py` embeds it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

ATOL = 1e-4
RTOL = 1e-4
COPY_SHAPE = (4, 64)
# (rtol, atol) of each zoo model (racefuzz.targets.zoo), widening a tighter host tolerance: about
# 10x the spread of ORT's CPU EP between 1 and 4 threads and optimizations off, and at least 5x
# what the correct plugin EPs here differ from it; 1e-6 at the least (a few float32 ulps).
# Measured with onnxruntime 1.32.0 on a 2-core x86-64 VM, 50 seeds, as the smallest t with
# |a - e| <= t + t*|e| (`differences`' "need"); CPU EP spread / testbed / nxrt-cpu:
#   lngelu 3.2e-7 / - / 9.1e-7    einsum 0 / - / 0        matmulnbits 0 / - / 1.2e-6
#   attention 0 / - / 3.7e-7      dynamic 2.1e-8 / - / 8e-8 (batch 1-5, seq 1-50)
#   large 6.4e-7 / 6.8e-6 / 6.4e-7 (the testbed takes only `large`; "-": runs on the CPU EP)
# All are under the default 1e-4: they bite only where a target sets a tighter tolerance.
MODEL_TOLERANCE: Mapping[str, tuple[float, float]] = {
    "lngelu": (5e-6, 5e-6),
    "einsum": (1e-6, 1e-6),
    "matmulnbits": (1e-5, 1e-5),
    "attention": (2e-6, 2e-6),
    "dynamic": (1e-6, 1e-6),
    "large": (5e-5, 5e-5),
}


def model_tolerance(model: str, rtol: float, atol: float) -> tuple[float, float]:
    """The larger of the host's (rtol, atol) and the model's own, each on its own."""
    own_rtol, own_atol = MODEL_TOLERANCE.get(model, (rtol, atol))
    return max(rtol, own_rtol), max(atol, own_atol)


@dataclass
class Profile:
    """A profile as the worker sees it (already resolved from the target's aliases)."""

    name: str
    library: str | None
    ep_name: str
    options: Mapping[str, str]
    device_type: str | None = None
    vendor_id: int | None = None
    intra_op_threads: int | None = None
    session_config: Mapping[str, str] = field(default_factory=dict)
    device_index: int | None = None  # the EP device's hardware device_id; None: any
    thread_pools: str = "session"  # or "global": the process's pools (handoff.thread_options)
    execution_mode: str = "sequential"  # or "parallel"
    inter_op_threads: int | None = None

    @staticmethod
    def from_json(name: str, d: Mapping[str, Any]) -> Profile:
        return Profile(
            name=name,
            library=d.get("library"),
            ep_name=d["ep_name"],
            options=dict(d.get("provider_options", {})),
            device_type=d.get("device_type"),
            vendor_id=d.get("vendor_id"),
            intra_op_threads=d.get("intra_op_threads"),
            session_config=dict(d.get("session_config", {})),
            device_index=d.get("device_index"),
            thread_pools=d.get("thread_pools", "session"),
            execution_mode=d.get("execution_mode", "sequential"),
            inter_op_threads=d.get("inter_op_threads"),
        )


@dataclass
class Session:
    session: Any
    profile: Profile
    model: str
    kept: Any = None  # the IOBinding a `bind` left for `bind [again]` (kept.KeptBinding)


@dataclass
class Value:
    value: Any
    data: np.ndarray[Any, Any]
    profile: Profile
    host_only: bool  # the profile's EP computes in host memory: no device copies
    source: Any = None  # what an `upload` still in flight on a stream reads from (kept.py)


class Host(Protocol):
    """What the op mixins use of `Runtime`."""

    profiles: dict[str, Profile]
    sessions: dict[str, Session]
    values: dict[str, Value]
    seed: int
    runs_in_flight: dict[str, list[Any]]  # session -> RunOptions of its runs in flight
    terminate_armed: set[str]  # sessions whose next run starts terminated
    env_api: str | None  # racefuzz/native/envapi.c built, for `share`; None: not here
    rtol: float
    atol: float
    measure: bool
    _lock: threading.Lock

    def _devices(self, profile: Profile) -> list[Any]: ...
    def _memory_info(self, profile: Profile) -> Any: ...
    def _value(self, shape: Sequence[int], dtype: Any, mem: Any) -> Any: ...
    def _copy(self, src: Any, dst: Any, host_only: bool, stream: Any = None) -> None: ...
    def _feeds(
        self, index: int, session: Any, dims: Sequence[int] = ()
    ) -> dict[str, np.ndarray[Any, Any]]: ...
    def _reference(self, model: str, feeds: Mapping[str, Any]) -> list[Any]: ...


def compare(
    actual: Sequence[Any],
    expected: Sequence[Any],
    rtol: float = RTOL,
    atol: float = ATOL,
    measure: bool = False,
) -> tuple[str, str]:
    """("ok" | "zeroed" | "mismatch", detail) for outputs against the reference; `measure`
    (racefuzz doctor): an ok's detail gives the largest differences, `differences`."""
    for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return "mismatch", f"output {k}: shape {list(a.shape)}, expected {list(e.shape)}"
        if not np.any(a) and np.any(e):
            return "zeroed", f"output {k}: all zeros"
        if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            nan = np.isnan(diff) & ~(np.isnan(a) & np.isnan(e))
            diff[np.isnan(diff)] = 0.0
            if nan.any():  # NaN where the reference has a number (or the other way round)
                at = np.unravel_index(int(np.argmax(nan)), diff.shape)
                where = [int(i) for i in at]
                return "mismatch", f"output {k}: {int(nan.sum())} NaN differences, first at {where}"
            at = np.unravel_index(int(np.argmax(diff)), diff.shape)
            return (
                "mismatch",
                f"output {k}: max |diff| {float(np.max(diff)):.3g} at {[int(i) for i in at]}",
            )
    return "ok", differences(actual, expected) if measure else ""


def differences(actual: Sequence[Any], expected: Sequence[Any]) -> str:
    """ "abs A rel R need N" over all outputs: the largest absolute difference, the largest
    relative one where the reference is not near zero (there allclose's atol is what holds),
    and the smallest t with |a - e| <= t + t * |e| everywhere (allclose at rtol = atol = t)."""
    abs_max = rel_max = need = 0.0
    for a, e in zip(actual, expected, strict=True):
        a, e = np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64)
        if a.size == 0:
            continue
        diff = np.abs(a - e)
        if np.isnan(diff).all():
            continue  # NaN in the same places only (allclose's equal_nan)
        abs_max = max(abs_max, float(np.nanmax(diff)))
        need = max(need, float(np.nanmax(diff / (1.0 + np.abs(e)))))
        big = np.abs(e) > 1e-3
        if np.any(big):
            rel_max = max(rel_max, float(np.nanmax(diff[big] / np.abs(e[big]))))
    return f"abs {abs_max:.3g} rel {rel_max:.3g} need {need:.3g}"


def random_feeds(
    session: Any, seed: int, dims: Sequence[int] = ()
) -> dict[str, np.ndarray[Any, Any]]:
    """Inputs for one run; `dims` sizes the symbolic dims in the order the inputs first name
    them (a step's `dims`), every other unknown dim is 1."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray[Any, Any]] = {}
    symbols: dict[str, int] = {}
    for inp in session.get_inputs():
        for d in inp.shape:
            if isinstance(d, str) and d not in symbols:
                symbols[d] = dims[len(symbols)] if len(symbols) < len(dims) else 1
        shape = [d if isinstance(d, int) and d > 0 else symbols.get(str(d), 1) for d in inp.shape]
        if "float" in inp.type:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[inp.name] = rng.integers(0, 4, size=shape).astype(np.int64)
    return feeds


# Exception types that ORT's Python API does not raise for what an EP does: raised in the op
# modules, they are a bug in racefuzz (a missing handler, a wrong call), never an EP finding.
_OWN_BUG_TYPES = (AttributeError, KeyError, NameError, TypeError, IndexError, AssertionError)
# The files of the op modules: each adds its own when imported (`own_code`), so that this module
# needs none of them (and repro.py's embedded copies, named after no real file, count too).
_OWN_FILES: set[str] = {__file__}


def own_code(file: str) -> None:
    """Counts `file` (a module's `__file__`) among the op modules for `is_own_bug`."""
    _OWN_FILES.add(file)


def is_own_bug(e: BaseException) -> bool:
    """Raised by the op modules' own code (its innermost frame is there), of a programming-error
    type.

    ORT's native calls have no Python frame, so their errors also end there: they are told
    apart by type (ORT raises its own classes, RuntimeError and ValueError).
    """
    if not isinstance(e, _OWN_BUG_TYPES):
        return False
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES
