"""`share` and `hard_release`: the calls of ORT's C API they need, which Python does not expose.

`share` replaces the environment's shared allocator of a profile's device memory with a new one
(`CreateSharedAllocator`, as an application does to change its configuration), before or after
sessions and values of that device exist. ORT keeps the replaced allocator while memory from it
is alive, so everything made earlier must still work (checked by the ops that use it later).

The way in is `racefuzz/native/envapi.c`: an EP library with no EP, registered once per worker
under `REGISTERED_AS`, whose CreateEpFactories keeps the OrtApiBase that ORT hands it. From
there, `OrtApiBase::GetApi` gives the process's OrtApi table, and each call is read from it by
its index: the table only ever grows at its end, so an index never changes (ORT's ABI rule).
The indices below are those of onnxruntime_c_api.h; API version 23 (ORT 1.23) is the first with
shared allocators for EP devices.

`hard_release` calls ReleaseSession on a session Python still holds, as a C or C++ application
does: kept values and bindings keep a Python session alive, but an OrtValue of the C API outlives
its session (ORT keeps its allocator), so a C++ application's values may outlive it too. The
OrtSession* is found through the binding's memory layout (`native_session`), checked twice.

Part of the worker's ops (`Runtime` mixes `EnvOps` in); imports only the stdlib, onnxruntime and
`base`/`protocol`, and `repro.py` embeds it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping
from typing import Any

import onnxruntime as ort

from racefuzz.worker.base import Host, own_code
from racefuzz.worker.protocol import Skip, StepResult

own_code(__file__)

REGISTERED_AS = "racefuzz_envapi"
API_VERSION = 23
# OrtApi slots (function pointer index in the struct).
_GET_ERROR_MESSAGE = 2
_CREATE_ENV = 3
_RELEASE_ENV = 92
_RELEASE_STATUS = 93
_GET_EP_DEVICES = 303
_HARDWARE_DEVICE_ID = 310
_EP_DEVICE_EP_NAME = 312
_EP_DEVICE_DEVICE = 316
_CREATE_SHARED_ALLOCATOR = 375
_SESSION_GET_INPUT_COUNT = 30
_SESSION_GET_OUTPUT_COUNT = 31
_RELEASE_SESSION = 95
_ORT_LOGGING_LEVEL_WARNING = 2
_ORT_DEVICE_ALLOCATOR = 0  # OrtAllocatorType: the only type CreateSharedAllocator takes

_P = ctypes.c_void_p
_lock = threading.Lock()
_api: list[ctypes.Array[ctypes.c_void_p]] = []


class _ApiBase(ctypes.Structure):
    _fields_ = [
        ("GetApi", ctypes.CFUNCTYPE(_P, ctypes.c_uint32)),
        ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p)),
    ]


def _table(helper: str) -> ctypes.Array[ctypes.c_void_p]:
    """The OrtApi table, the helper library registered on first use."""
    with _lock:
        if not _api:
            ort.register_execution_provider_library(REGISTERED_AS, helper)
            get_base = ctypes.CDLL(helper).racefuzz_ort_api_base
            get_base.restype = ctypes.POINTER(_ApiBase)
            table = get_base().contents.GetApi(API_VERSION)
            if not table:
                raise RuntimeError(f"this onnxruntime has no C API version {API_VERSION}")
            _api.append((ctypes.c_void_p * 400).from_address(table))
        return _api[0]


def _call(table: Any, slot: int, restype: Any, *args: tuple[Any, Any]) -> Any:
    fn = ctypes.CFUNCTYPE(restype, *(t for t, _ in args))(table[slot])
    return fn(*(v for _, v in args))


def _ok(table: Any, slot: int, *args: tuple[Any, Any]) -> None:
    """A call that returns an OrtStatus*: its error, if any, raised as ORT's Python API would."""
    status = _call(table, slot, _P, *args)
    if status:
        message = _call(table, _GET_ERROR_MESSAGE, ctypes.c_char_p, (_P, status))
        _call(table, _RELEASE_STATUS, None, (_P, status))
        raise RuntimeError(message.decode(errors="replace"))


def create_shared_allocator(helper: str, ep_name: str, device_id: int, mem_type: int) -> None:
    """CreateSharedAllocator for the OrtEpDevice of `ep_name` on hardware device `device_id`:
    a new shared allocator of that device's `mem_type` memory replaces the environment's."""
    t = _table(helper)
    env = _P()
    # The process has one OrtEnv: CreateEnv hands it out again (and ReleaseEnv gives it back).
    _ok(
        t,
        _CREATE_ENV,
        (ctypes.c_int, _ORT_LOGGING_LEVEL_WARNING),
        (ctypes.c_char_p, b"racefuzz"),
        (ctypes.POINTER(_P), ctypes.byref(env)),
    )
    try:
        devices, count = ctypes.POINTER(_P)(), ctypes.c_size_t()
        _ok(
            t,
            _GET_EP_DEVICES,
            (_P, env),
            (ctypes.POINTER(ctypes.POINTER(_P)), ctypes.byref(devices)),
            (ctypes.POINTER(ctypes.c_size_t), ctypes.byref(count)),
        )
        for i in range(count.value):
            d = devices[i]
            name = _call(t, _EP_DEVICE_EP_NAME, ctypes.c_char_p, (_P, d))
            hw = _call(t, _EP_DEVICE_DEVICE, _P, (_P, d))
            if (
                name.decode() != ep_name
                or _call(t, _HARDWARE_DEVICE_ID, ctypes.c_uint32, (_P, hw)) != device_id
            ):
                continue
            _ok(
                t,
                _CREATE_SHARED_ALLOCATOR,
                (_P, env),
                (_P, d),
                (ctypes.c_int, mem_type),
                (ctypes.c_int, _ORT_DEVICE_ALLOCATOR),
                (_P, None),
                (_P, None),
            )
            return
        raise RuntimeError(f"no OrtEpDevice of '{ep_name}' on device {device_id}")
    finally:
        _call(t, _RELEASE_ENV, None, (_P, env))


# A pybind11 instance holds its C++ object's address right after the PyObject header.
_PYBIND_VALUE = 16


class NotReachable(Exception):
    """This onnxruntime's Python session does not lay out as `native_session` expects."""


def _word(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def native_session(helper: str, session: Any) -> tuple[int, int]:
    """(the OrtSession* of a Python `InferenceSession`, the address of the pointer that owns it).

    ORT's Python binding gives neither. An IOBinding's C++ object starts with its session's
    pointer, and the session's own C++ object (whose memory `malloc_usable_size` bounds) holds
    the one pointer that owns it: found in both places, and the C API's input and output
    counts matching Python's, it is the session. Anything else raises `NotReachable`."""
    binding = session.io_binding()._iobinding
    handle = _word(_word(id(binding) + _PYBIND_VALUE))
    owner = _word(id(session._sess) + _PYBIND_VALUE)
    if not handle or not owner:
        raise NotReachable("no native session behind the Python objects")
    libc = ctypes.CDLL(None)
    libc.malloc_usable_size.restype = ctypes.c_size_t
    libc.malloc_usable_size.argtypes = [_P]
    size = libc.malloc_usable_size(owner)
    slots = [owner + off for off in range(0, size - 7, 8) if _word(owner + off) == handle]
    if len(slots) != 1:
        raise NotReachable(f"{len(slots)} owning pointers to the session, not one")
    t = _table(helper)
    for slot, names in (
        (_SESSION_GET_INPUT_COUNT, session.get_inputs()),
        (_SESSION_GET_OUTPUT_COUNT, session.get_outputs()),
    ):
        n = ctypes.c_size_t()
        _ok(t, slot, (_P, handle), (ctypes.POINTER(ctypes.c_size_t), ctypes.byref(n)))
        if n.value != len(names):
            raise NotReachable("the C API and Python disagree on the session's inputs")
    return handle, slots[0]


def hard_release(helper: str, handle: int, owning: int) -> None:
    """ReleaseSession now, on what `native_session` found. The Python session gives up
    ownership first, so that it never frees the session again; it must not be used after."""
    ctypes.c_void_p.from_address(owning).value = None
    _call(_table(helper), _RELEASE_SESSION, None, (_P, handle))


class EnvOps:
    def op_share(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        profile = self.profiles[step["profile"]]
        if self._memory_info(profile) is None:
            return StepResult.skip(Skip.UNSUPPORTED, "the EP computes in host memory")
        if not self.env_api:
            return StepResult.skip(Skip.NO_COMPILER, "no C compiler for envapi.c")
        device_id = self._devices(profile)[0].device.device_id
        default_memory = int(ort.OrtDeviceMemoryType.DEFAULT)
        create_shared_allocator(self.env_api, profile.ep_name, device_id, default_memory)
        return StepResult()

    def op_hard_release(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        if not self.env_api:
            return StepResult.skip(Skip.NO_COMPILER, "no C compiler for envapi.c")
        s = self.sessions[step["session"]]
        try:
            found = native_session(self.env_api, s.session)
        except NotReachable as e:
            return StepResult.skip(Skip.UNSUPPORTED, f"no native session to release: {e}")
        with self._lock:
            self.sessions.pop(step["session"])
        s.kept = None  # its binding for `bind [again]` goes; values it made stay the schedule's
        hard_release(self.env_api, *found)
        return StepResult()
