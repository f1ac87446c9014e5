"""The calls a schedule step makes, through the public onnxruntime Python API, and their checks.

`Runtime` holds what a schedule builds up inside one worker process (registered libraries, live
sessions, kept device values) and runs one step at a time, returning a `StepResult`
(`protocol.py`). It never raises for anything ORT or the EP does: errors are outcomes; an
exception of racefuzz's own code (`base.is_own_bug`) is an outcome carrying its traceback.

Each op of `schedule/op_table.py` has its handler here, `Runtime.op_<name>`, found by name (a
missing one is racefuzz's own bug); a handler that makes a session or value is marked `@makes`,
so that a step is skipped, not failed, when what it names was never made (an earlier step
failed). `mode` and `peer` arrive in the step dict like the other fields. The handlers of
`run_bound` and `feed` (`handoff.py`), `run`, `run_async` and `terminate` (`runs.py`) and `share`
(`env_api.py`) are mixed in; what they share with this file is in `base.py`.

Data checks: a run is compared with the CPU EP's output on the same inputs (a reference session
per model, cached); a copy round trip must return the bytes it was given.

Imports only the stdlib, numpy, onnxruntime and those worker modules: `repro.py` embeds their
sources so that a ticket replays on a machine without racefuzz.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from racefuzz.worker import env_api, handoff, holds, kept, runs
from racefuzz.worker.base import (
    ATOL,
    COPY_SHAPE,
    RTOL,
    Profile,
    Session,
    Value,
    is_own_bug,
    own_code,
    random_feeds,
)
from racefuzz.worker.protocol import Skip, StepResult

own_code(__file__)
# A developer switch: the named op raises as if racefuzz had a bug (tests the internal path).
SELFTEST_INTERNAL = "RACEFUZZ_SELFTEST_INTERNAL"


# The CPU EP's sessions that a run's outputs are checked against, by model file: racefuzz's
# own, never the EP's, so a persistent worker (`persistent.py`) keeps them across schedules.
_REFERENCES: dict[str, Any] = {}
_REFERENCES_LOCK = threading.Lock()

Handler = Callable[["Runtime", int, Mapping[str, Any]], StepResult]
# Op name -> the step field whose name its handler makes ("session", "value"): such a step is
# not skipped for naming something that does not exist yet. Filled by `makes`.
_MAKES: dict[str, str] = dict(kept.MAKES)


def makes(field: str) -> Callable[[Handler], Handler]:
    """Marks `Runtime.op_<name>` as making the session or value named in `field`."""

    def mark(handler: Handler) -> Handler:
        _MAKES[handler.__name__.removeprefix("op_")] = field
        return handler

    return mark


class Runtime(handoff.HandoffOps, kept.KeptOps, runs.RunOps, env_api.EnvOps):
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
        self.measure = False  # an ok check's detail gives the differences (racefuzz doctor)
        self.libraries = dict(libraries)
        self.profiles = dict(profiles)
        self.models = dict(models)
        self.seed = seed
        self.sessions: dict[str, Session] = {}
        self.values: dict[str, Value] = {}
        self.runs_in_flight: dict[str, list[Any]] = {}  # RunOptions a `terminate` reaches
        self.terminate_armed: set[str] = set()
        self._lock = threading.Lock()  # guards the dicts; ORT calls run outside it
        self.registered: set[str] = set()  # libraries this schedule registered and left so
        self.holds = holds.find(self.libraries.values())  # scheduling points, with the layer

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
        path = self.models[model]
        with _REFERENCES_LOCK:
            ref = _REFERENCES.get(path)
            if ref is None:
                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                handoff.follow_global_pools(so)
                ref = ort.InferenceSession(
                    path, sess_options=so, providers=["CPUExecutionProvider"]
                )
                _REFERENCES[path] = ref
        return list(ref.run(None, dict(feeds)))

    def _feeds(
        self, index: int, session: Any, dims: Sequence[int] = ()
    ) -> dict[str, np.ndarray[Any, Any]]:
        return random_feeds(session, self.seed * 1_000_003 + index, dims)

    # --- ops ----------------------------------------------------------------------------

    def step(self, index: int, step: Mapping[str, Any]) -> StepResult:
        op = step["op"]
        missing = self._missing_subject(step)
        if missing:
            return StepResult.skip(Skip.MISSING, missing)
        try:
            if os.environ.get(SELFTEST_INTERNAL) == op:
                raise KeyError(f"{SELFTEST_INTERNAL} asked this '{op}' to fail as a racefuzz bug")
            handler = getattr(self, "op_" + op)
            result: StepResult = handler(index, step)
            return result
        except Exception as e:  # ORT and EP errors are outcomes, not worker failures
            own = "".join(traceback.format_exception(e)) if is_own_bug(e) else ""
            return StepResult.error(f"{type(e).__name__}: {e}", internal=own)

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

    def teardown(self) -> StepResult:
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
            return StepResult.error(f"{type(e).__name__}: {e}")
        return StepResult()

    def restore(self) -> bool:
        """After `teardown`: the process as a fresh worker found it, so that it may serve another
        schedule (`persistent.py`): every library this schedule registered unregistered, which
        also drops the shared allocators `share` made for their devices (onnxruntime's
        UnregisterExecutionProviderLibrary does). False, with a line why, where one fails."""
        try:
            for name in sorted(self.registered):
                ort.unregister_execution_provider_library(name)
        except Exception as e:
            print(
                f"racefuzz: cannot unregister ({e}); the next schedule gets a new worker",
                file=sys.stderr,
            )
            return False
        self.registered.clear()
        return True

    def op_register(self, index: int, step: Mapping[str, Any]) -> StepResult:
        for name in [step["library"]] if step.get("library") else list(self.libraries):
            ort.register_execution_provider_library(name, self.libraries[name])
            self.registered.add(name)
        return StepResult()

    def op_unregister(self, index: int, step: Mapping[str, Any]) -> StepResult:
        for name in [step["library"]] if step.get("library") else list(self.libraries):
            ort.unregister_execution_provider_library(name)
            self.registered.discard(name)
        return StepResult()

    @makes("session")
    def op_create(self, index: int, step: Mapping[str, Any]) -> StepResult:
        profile = self.profiles[step["profile"]]
        so = ort.SessionOptions()
        so.add_session_config_entry(holds.SESSION_CONFIG_KEY, step["session"])
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
            self.sessions[step["session"]] = Session(sess, profile, step["model"])
        return StepResult()

    def _upload(self, profile: Profile, index: int, stream: Any = None) -> Value:
        data = np.random.default_rng(self.seed * 1_000_003 + index).standard_normal(COPY_SHAPE)
        data = data.astype(np.float32)
        mem = self._memory_info(profile)
        dev = self._value(COPY_SHAPE, np.float32, mem)
        # `data` lives in the value: an upload still in flight on `stream` reads it later.
        self._copy(ort.OrtValue.ortvalue_from_numpy(data), dev, mem is None, stream)
        return Value(dev, data, profile, mem is None)

    def _download(self, v: Value, stream: Any = None) -> StepResult:
        # `host` is kept alive here: the OrtValue only borrows its buffer, and reading the value
        # back through `.numpy()` after the array died would read freed memory.
        host = np.zeros_like(v.data)
        back = ort.OrtValue.ortvalue_from_numpy(host)
        self._copy(v.value, back, v.host_only, stream)
        data = v.data
        got = back.numpy()
        if got.tobytes() == data.tobytes():
            return StepResult.checked("ok")
        changed = int(np.count_nonzero(got != data))
        kind = "zeros" if not np.any(got) else "other bytes"
        detail = f"{changed} of {data.size} elements changed ({kind})"
        return StepResult.checked("corrupt-copy", detail)

    def op_copy(self, index: int, step: Mapping[str, Any]) -> StepResult:
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
                return StepResult.skip(Skip.UNSUPPORTED, "the EP has no streams")
        v = self._upload(profile, index, stream)
        return self._download(v, stream if step.get("mode") == "stream" else None)

    @makes("value")
    def op_alloc(self, index: int, step: Mapping[str, Any]) -> StepResult:
        v = self._upload(self.profiles[step["profile"]], index)
        with self._lock:
            self.values[step["value"]] = v
        where = None if v.host_only else handoff.device_of(self, v.profile)
        check, detail = handoff.where_check([v.value], where)
        return StepResult() if check == "ok" else StepResult.checked(check, detail)

    def op_read(self, index: int, step: Mapping[str, Any]) -> StepResult:
        return self._download(self.values[step["value"]])

    def op_free(self, index: int, step: Mapping[str, Any]) -> StepResult:
        with self._lock:
            v = self.values.pop(step["value"])
        del v
        gc.collect()
        return StepResult()

    def placement(self, session: str) -> dict[str, list[str]]:
        """Which EP took which node of a session's optimised graph ("OpType name")."""
        taken: dict[str, list[str]] = {}
        for sub in self.sessions[session].session.get_provider_graph_assignment_info():
            nodes = [f"{n.op_type} {n.name}".strip() for n in sub.get_nodes()]
            taken.setdefault(str(sub.ep_name), []).extend(nodes)
        return taken

    def op_hold(self, index: int, step: Mapping[str, Any]) -> StepResult:
        if self.holds is None:
            return StepResult.skip(Skip.UNSUPPORTED, "scheduling points need the EP-ABI layer")
        self.holds.arm(step["session"], step["mode"])
        return StepResult()

    def op_resume(self, index: int, step: Mapping[str, Any]) -> StepResult:
        # The sequencer has released the session's parked threads and waited for their steps.
        return StepResult()

    def op_release(self, index: int, step: Mapping[str, Any]) -> StepResult:
        with self._lock:
            s = self.sessions.pop(step["session"])
        del s
        gc.collect()
        return StepResult()
