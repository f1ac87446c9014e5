"""The calls a schedule step makes, through the public onnxruntime Python API, and their checks.

`Runtime` holds what a schedule builds up inside one worker process (registered libraries, live
sessions, kept device values) and runs one step at a time, returning a plain-dict outcome:
`{"ok": bool, "message": str, "check": None | "ok" | "zeroed" | "mismatch" | "corrupt-copy",
"detail": str}`. It never raises for anything ORT or the EP does: errors are outcomes.

Each op of `schedule/op_table.py` has its handler here, `Runtime.op_<name>`, found by name (a
missing one is racefuzz's own bug); a handler that makes a session or value is marked `@makes`,
so that a step is skipped, not failed, when what it names was never made (an earlier step
failed). `mode` and `peer` arrive in the step dict like the other fields.

Data checks: a run is compared with the CPU EP's output on the same inputs (a reference session
per model, cached); a copy round trip must return the bytes it was given.

Imports only the stdlib, numpy and onnxruntime: `repro.py` embeds this file's source so that a
ticket replays on a machine without racefuzz.
"""

from __future__ import annotations

import gc
import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime as ort

from racefuzz.worker import env_api, handoff, runs

ATOL = 1e-4
RTOL = 1e-4
COPY_SHAPE = (4, 64)

Outcome = dict[str, Any]


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
class _Session:
    session: Any
    profile: Profile
    model: str


@dataclass
class _Value:
    value: Any
    data: np.ndarray[Any, Any]
    profile: Profile
    host_only: bool  # the profile's EP computes in host memory: no device copies


def compare(
    actual: Sequence[Any], expected: Sequence[Any], rtol: float = RTOL, atol: float = ATOL
) -> tuple[str, str]:
    """("ok" | "zeroed" | "mismatch", detail) for outputs against the reference."""
    for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return "mismatch", f"output {k}: shape {list(a.shape)}, expected {list(e.shape)}"
        if not np.any(a) and np.any(e):
            return "zeroed", f"output {k}: all zeros"
        if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            at = np.unravel_index(int(np.nanargmax(diff)), diff.shape)
            return "mismatch", f"output {k}: max |diff| {float(np.nanmax(diff)):.3g} at {list(at)}"
    return "ok", ""


def random_feeds(session: Any, seed: int) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray[Any, Any]] = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        if "float" in inp.type:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[inp.name] = rng.integers(0, 4, size=shape).astype(np.int64)
    return feeds


# Exception types that ORT's Python API does not raise for what an EP does: raised in this
# module, they are a bug in racefuzz (a missing handler, a wrong call), never an EP finding.
_OWN_BUG_TYPES = (AttributeError, KeyError, NameError, TypeError, IndexError, AssertionError)
# A developer switch: the named op raises as if racefuzz had a bug (tests the internal path).
SELFTEST_INTERNAL = "RACEFUZZ_SELFTEST_INTERNAL"


def is_own_bug(e: BaseException) -> bool:
    """Raised by this file's own code (its innermost frame is here), of a programming-error type.

    ORT's native calls have no Python frame, so their errors also end here: they are told
    apart by type (ORT raises its own classes, RuntimeError and ValueError).
    """
    if not isinstance(e, _OWN_BUG_TYPES):
        return False
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename in (
        __file__,
        handoff.__file__,
        runs.__file__,
        env_api.__file__,
    )


Handler = Callable[["Runtime", int, Mapping[str, Any]], Outcome]
# Op name -> the step field whose name its handler makes ("session", "value"): such a step is
# not skipped for naming something that does not exist yet. Filled by `makes`.
_MAKES: dict[str, str] = {}


def makes(field: str) -> Callable[[Handler], Handler]:
    """Marks `Runtime.op_<name>` as making the session or value named in `field`."""

    def mark(handler: Handler) -> Handler:
        _MAKES[handler.__name__.removeprefix("op_")] = field
        return handler

    return mark


class Runtime(handoff.HandoffOps, runs.RunOps, env_api.EnvOps):
    def __init__(
        self,
        libraries: Mapping[str, str],
        profiles: Mapping[str, Profile],
        models: Mapping[str, str],
        seed: int = 0,
        record_placement: bool = False,
        env_api: str | None = None,
    ) -> None:
        self.record_placement = record_placement  # for `placement()` (racefuzz doctor)
        self.env_api = env_api  # racefuzz/native/envapi.c built, for `share`; None: not here
        self.rtol, self.atol = RTOL, ATOL  # a GPU target's own tolerance replaces these
        self.libraries = dict(libraries)
        self.profiles = dict(profiles)
        self.models = dict(models)
        self.seed = seed
        self.sessions: dict[str, _Session] = {}
        self.values: dict[str, _Value] = {}
        self.runs_in_flight: dict[str, list[Any]] = {}  # RunOptions a `terminate` reaches
        self.terminate_armed: set[str] = set()
        self._lock = threading.Lock()  # guards the dicts; ORT calls run outside it
        self._references: dict[str, Any] = {}

    # --- helpers ------------------------------------------------------------------------

    def _devices(self, profile: Profile) -> list[Any]:
        found = []
        for d in ort.get_ep_devices():
            if d.ep_name != profile.ep_name:
                continue
            hw = d.device
            if profile.device_type and hw.type.name.lower() != profile.device_type.lower():
                continue
            if profile.vendor_id is not None and hw.vendor_id != profile.vendor_id:
                continue
            if profile.device_index is not None and hw.device_id != profile.device_index:
                continue
            found.append(d)
        if not found:
            raise RuntimeError(f"no EP device for profile '{profile.name}' ({profile.ep_name})")
        return found

    def _memory_info(self, profile: Profile) -> Any:
        """The profile's device memory, or None when its EP computes in host memory."""
        if profile.library is None:
            return None  # ORT's own EPs here are CPU EPs
        mem = self._devices(profile)[0].memory_info(ort.OrtDeviceMemoryType.DEFAULT)
        return None if mem is None or mem.name == "Cpu" else mem

    def _value(self, shape: Sequence[int], dtype: Any, mem: Any) -> Any:
        if mem is None:  # ORT-owned host memory (a view of a temporary array would dangle)
            return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype)
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, memory_info=mem)

    @staticmethod
    def _copy(src: Any, dst: Any, host_only: bool, stream: Any = None) -> None:
        # copy_tensors has no host-to-host transfer; a host-memory EP has nothing to copy.
        if host_only:
            dst.update_inplace(src.numpy())
        else:
            ort.copy_tensors([src], [dst], stream)

    def _reference(self, model: str, feeds: Mapping[str, Any]) -> list[Any]:
        with self._lock:
            ref = self._references.get(model)
            if ref is None:
                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                handoff.follow_global_pools(so)
                ref = ort.InferenceSession(
                    self.models[model], sess_options=so, providers=["CPUExecutionProvider"]
                )
                self._references[model] = ref
        return list(ref.run(None, dict(feeds)))

    def _feeds(self, index: int, session: Any) -> dict[str, np.ndarray[Any, Any]]:
        return random_feeds(session, self.seed * 1_000_003 + index)

    # --- ops ----------------------------------------------------------------------------

    def step(self, index: int, step: Mapping[str, Any]) -> Outcome:
        op = step["op"]
        missing = self._missing_subject(step)
        if missing:
            return {"ok": True, "check": None, "detail": f"skipped: {missing}"}
        try:
            if os.environ.get(SELFTEST_INTERNAL) == op:
                raise KeyError(f"{SELFTEST_INTERNAL} asked this '{op}' to fail as a racefuzz bug")
            handler = getattr(self, "op_" + op)
            result: Outcome = handler(index, step)
            return result
        except Exception as e:  # ORT and EP errors are outcomes, not worker failures
            outcome: Outcome = {"ok": False, "message": f"{type(e).__name__}: {e}", "check": None}
            if is_own_bug(e):
                outcome["internal"] = "".join(traceback.format_exception(e))
            return outcome

    def _missing_subject(self, step: Mapping[str, Any]) -> str:
        """Why a step cannot run because an earlier step it depends on failed, or ''."""
        made = _MAKES.get(step["op"])
        with self._lock:
            if made != "session" and step.get("session") not in (None, *self.sessions):
                return f"session {step['session']} was not created"
            if made != "value" and step.get("value") not in (None, *self.values):
                return f"value {step['value']} was not allocated"
            if step.get("peer") not in (None, *self.sessions, *self.values):
                return f"peer {step['peer']} was not made"
        return ""

    def teardown(self) -> Outcome:
        """Drop what the schedule left alive, values first, as an application exiting would."""
        with self._lock:
            values, self.values = list(self.values.values()), {}
            sessions, self.sessions = list(self.sessions.values()), {}
        try:
            values.clear()
            gc.collect()
            sessions.clear()
            gc.collect()
        except Exception as e:
            return {"ok": False, "message": f"{type(e).__name__}: {e}", "check": None}
        return {"ok": True}

    def op_register(self, index: int, step: Mapping[str, Any]) -> Outcome:
        for name in [step["library"]] if step.get("library") else list(self.libraries):
            ort.register_execution_provider_library(name, self.libraries[name])
        return {"ok": True}

    def op_unregister(self, index: int, step: Mapping[str, Any]) -> Outcome:
        for name in [step["library"]] if step.get("library") else list(self.libraries):
            ort.unregister_execution_provider_library(name)
        return {"ok": True}

    @makes("session")
    def op_create(self, index: int, step: Mapping[str, Any]) -> Outcome:
        profile = self.profiles[step["profile"]]
        so = ort.SessionOptions()
        handoff.thread_options(so, profile)
        for k, v in profile.session_config.items():
            so.add_session_config_entry(k, v)
        if self.record_placement:
            so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        path = self.models[step["model"]]
        if profile.library is None and profile.ep_name.endswith("ExecutionProvider"):
            providers = [(profile.ep_name, dict(profile.options))]
            sess = ort.InferenceSession(
                path, sess_options=so, providers=providers, enable_fallback=0
            )
        else:
            so.add_provider_for_devices(self._devices(profile), dict(profile.options))
            # No fallback: ORT would otherwise rebuild a failed session on the CPU EP, print
            # "EP Error" and carry on, hiding exactly what racefuzz looks for.
            sess = ort.InferenceSession(path, sess_options=so, enable_fallback=0)
        with self._lock:
            self.sessions[step["session"]] = _Session(sess, profile, step["model"])
        return {"ok": True}

    def _upload(self, profile: Profile, index: int, stream: Any = None) -> _Value:
        data = np.random.default_rng(self.seed * 1_000_003 + index).standard_normal(COPY_SHAPE)
        data = data.astype(np.float32)
        mem = self._memory_info(profile)
        dev = self._value(COPY_SHAPE, np.float32, mem)
        # `data` lives in the value: an upload still in flight on `stream` reads it later.
        self._copy(ort.OrtValue.ortvalue_from_numpy(data), dev, mem is None, stream)
        return _Value(dev, data, profile, mem is None)

    def _download(self, v: _Value, stream: Any = None) -> Outcome:
        # `host` is kept alive here: the OrtValue only borrows its buffer, and reading the value
        # back through `.numpy()` after the array died would read freed memory.
        host = np.zeros_like(v.data)
        back = ort.OrtValue.ortvalue_from_numpy(host)
        self._copy(v.value, back, v.host_only, stream)
        data = v.data
        got = back.numpy()
        if got.tobytes() == data.tobytes():
            return {"ok": True, "check": "ok"}
        changed = int(np.count_nonzero(got != data))
        kind = "zeros" if not np.any(got) else "other bytes"
        detail = f"{changed} of {data.size} elements changed ({kind})"
        return {"ok": True, "check": "corrupt-copy", "detail": detail}

    def op_copy(self, index: int, step: Mapping[str, Any]) -> Outcome:
        # Modes: the upload goes on a stream of the profile's EP device (it may return before the
        # copy lands: ORT never syncs it); stream reads back on it, stream_unordered without one.
        profile = self.profiles[step["profile"]]
        stream = None
        if step.get("mode") and self._memory_info(profile) is not None:
            try:
                stream = self._devices(profile)[0].create_sync_stream()
            except Exception as e:  # ORT: "The execution provider does not support streams."
                if "does not support streams" not in str(e):
                    raise
                return {"ok": True, "check": None, "detail": "skipped: the EP has no streams"}
        v = self._upload(profile, index, stream)
        return self._download(v, stream if step.get("mode") == "stream" else None)

    @makes("value")
    def op_alloc(self, index: int, step: Mapping[str, Any]) -> Outcome:
        v = self._upload(self.profiles[step["profile"]], index)
        with self._lock:
            self.values[step["value"]] = v
        where = None if v.host_only else handoff.device_of(self, v.profile)
        check, detail = handoff.where_check([v.value], where)
        return {"ok": True} if check == "ok" else {"ok": True, "check": check, "detail": detail}

    def op_read(self, index: int, step: Mapping[str, Any]) -> Outcome:
        return self._download(self.values[step["value"]])

    def op_free(self, index: int, step: Mapping[str, Any]) -> Outcome:
        with self._lock:
            v = self.values.pop(step["value"])
        del v
        gc.collect()
        return {"ok": True}

    def placement(self, session: str) -> dict[str, list[str]]:
        """Which EP took which node of a session's optimised graph ("OpType name")."""
        taken: dict[str, list[str]] = {}
        for sub in self.sessions[session].session.get_provider_graph_assignment_info():
            nodes = [f"{n.op_type} {n.name}".strip() for n in sub.get_nodes()]
            taken.setdefault(str(sub.ep_name), []).extend(nodes)
        return taken

    def op_release(self, index: int, step: Mapping[str, Any]) -> Outcome:
        with self._lock:
            s = self.sessions.pop(step["session"])
        del s
        gc.collect()
        return {"ok": True}
