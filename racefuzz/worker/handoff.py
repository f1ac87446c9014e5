"""Ops and checks between sessions and devices: where a device value lives, IOBinding runs
(`run_bound` and its modes), one session's device output fed to another session (`feed`), and
the session options that change ORT's threads.

Part of the worker's ops (`Runtime` mixes `HandoffOps` in); imports only the stdlib, numpy,
onnxruntime and `base`/`protocol`, and `repro.py` embeds it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from racefuzz.worker.base import Host, Profile, compare, own_code
from racefuzz.worker.protocol import Skip, StepResult

own_code(__file__)

# DLPack's DLDevice and the head of DLTensor: all `dl_device` reads of a capsule.
_DLPACK_NAME = b"dltensor"


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensorHead(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice)]


def dl_device(value: Any) -> tuple[int, int] | None:
    """(DLPack device type, device id) of an OrtValue: Python has no OrtValue.memory_info(), and
    DLPack carries the id ORT labelled the value with (every GPU is kDLCUDA, 2; host is 1).
    None where ORT cannot export the EP's memory (WebGPU buffers): the place is then unknown."""
    try:
        capsule = value._get_c_value().to_dlpack()
    except Exception as e:  # ORT's own refusal, e.g. "DLPack export is not supported for ..."
        if "DLPack" not in str(e):
            raise
        return None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    head = _DLTensorHead.from_address(get(capsule, _DLPACK_NAME))
    return int(head.device.device_type), int(head.device.device_id)


def where_check(values: Sequence[Any], device_id: int | None) -> tuple[str, str]:
    """("ok", "") when every device value is labelled with `device_id` (None: nothing to check),
    else ("misplaced", detail): the EP put an output or allocation on another device."""
    if device_id is None:
        return "ok", ""
    for k, v in enumerate(values):
        where = dl_device(v)
        if where is None:
            continue
        kind, got = where
        if kind != 1 and got != device_id:
            return "misplaced", f"value {k}: on device {got}, asked for device {device_id}"
    return "ok", ""


_global_pools = threading.Lock()
_global_pools_set: list[tuple[int, int]] = []  # the sizes this process set, once


def thread_options(so: Any, profile: Profile) -> None:
    """Applies a profile's threading choices to SessionOptions. Global pools are process-wide:
    the first profile that asks sets their sizes for the whole worker."""
    if profile.thread_pools == "global":
        with _global_pools:
            if not _global_pools_set:
                sizes = (profile.intra_op_threads or 0, profile.inter_op_threads or 0)
                ort.set_global_thread_pool_sizes(*sizes)
                _global_pools_set.append(sizes)
    # ORT refuses a session's own pools once the process has global ones.
    if not follow_global_pools(so) and profile.intra_op_threads is not None:
        so.intra_op_num_threads = profile.intra_op_threads
    if profile.execution_mode == "parallel":
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    if profile.inter_op_threads is not None and not _global_pools_set:
        so.inter_op_num_threads = profile.inter_op_threads


def intra_op_pool_size(profile: Profile) -> int:
    """How many threads a session of `profile` computes with: what the profile (or, under
    global pools, the first profile that set them) asked for, else ORT's default of one per
    physical core (counted here as the cores this process may use)."""
    asked = _global_pools_set[0][0] if _global_pools_set else profile.intra_op_threads or 0
    if asked:
        return asked
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return len(usable) if usable else os.cpu_count() or 1


def follow_global_pools(so: Any) -> bool:
    """Once this process has global pools, every session (the CPU references too) must use
    them: ORT fails any other with "use_per_session_threads must be false"."""
    if _global_pools_set:
        so.use_per_session_threads = False
    return bool(_global_pools_set)


def device_of(host: Host, profile: Profile) -> int | None:
    """The device id a profile's device values must carry; None for host memory."""
    mem = host._memory_info(profile)
    return None if mem is None else int(mem.device_id)


# OrtDevice type names (`OrtDevice.make`) of the kinds of memory an EP may have.
_MEMORY_KINDS = ("gpu", "npu", "cpu")
_memory_kinds: dict[tuple[str, int, int, int], str] = {}  # found by `memory_kind`, per process


def memory_kind(mem: Any) -> str | None:
    """The type of the device `mem` (an EP device's OrtMemoryInfo) lives on, as `OrtDevice.make`
    names it; None when the environment has no allocator of that memory.

    ORT's Python OrtMemoryInfo shows the device id, vendor and memory type but not the device
    type, so this asks which type the environment's allocator of that memory is filed under: an
    empty value made through a memory info of each type (one of no bytes allocates nothing)."""
    key = (str(mem.name), int(mem.device_id), int(mem.device_vendor_id), int(mem.device_mem_type))
    if key in _memory_kinds:
        return _memory_kinds[key]
    for kind in _MEMORY_KINDS:
        asked = ort.OrtMemoryInfo.create_v2(
            mem.name,
            getattr(ort.OrtMemoryInfoDeviceType, kind.upper()),
            mem.device_vendor_id,
            mem.device_id,
            mem.device_mem_type,
            0,
            mem.allocator_type,
        )
        try:
            ort.OrtValue.ortvalue_from_shape_and_type([0], np.float32, memory_info=asked)
        except Exception as e:  # ORT: "No shared allocator found for: OrtMemoryInfo:[...]"
            if "allocator" not in str(e):
                raise
            continue
        _memory_kinds[key] = kind
        return kind
    return None


def bound_device(host: Host, profile: Profile, mem: Any) -> Any:
    """The C OrtDevice for binding an output to `mem`'s device: the public `bind_output` cannot
    name the vendor id ORT needs to find the EP's allocator. Its type is the memory's, which need
    not be the hardware device's (an NPU EP may keep tensors in GPU memory); only where the
    environment has no allocator of `mem` to tell it is the hardware device's type a guess."""
    kind = memory_kind(mem) or host._devices(profile)[0].device.type.name.lower()
    return ort.OrtDevice.make(kind, int(mem.device_id), mem.device_vendor_id)._get_c_device()


def same_backend(a: Profile, b: Profile) -> bool:
    # One EP configuration on one or two devices. Two configurations that share an OrtDevice
    # label but not its memory (the testbed's dml and mgx: residual R2) are not chained.
    return (a.library, a.ep_name, dict(a.options)) == (b.library, b.ep_name, dict(b.options))


class HandoffOps:
    def op_run_bound(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        # Modes (op_table.py): host_in binds host inputs (ORT uploads them at bind time, on the
        # session's stream) and device outputs ORT allocates; host_out binds host outputs; sync
        # calls synchronize_inputs/outputs (OrtEp::Sync) around the run. Plain: device values.
        mode = step.get("mode") or ""
        s = self.sessions[step["session"]]
        feeds, mem = (
            self._feeds(index, s.session, step.get("dims", ())),
            self._memory_info(s.profile),
        )
        expected = self._reference(s.model, feeds)
        binding = s.session.io_binding()
        host_in, host_out = mode.startswith("host_in"), mode == "host_out" or mem is None
        for name, array in feeds.items():
            if host_in:
                binding.bind_cpu_input(name, array)
            else:
                dev = self._value(array.shape, array.dtype, mem)
                self._copy(ort.OrtValue.ortvalue_from_numpy(array), dev, mem is None)
                binding.bind_ortvalue_input(name, dev)
        for out, ref in zip(s.session.get_outputs(), expected, strict=True):
            if host_out:
                binding.bind_output(out.name)  # ORT allocates it in host memory
            elif host_in:  # the public bind_output cannot name the vendor id ORT needs
                binding._iobinding.bind_output(out.name, bound_device(self, s.profile, mem))
            else:
                binding.bind_ortvalue_output(out.name, self._value(ref.shape, ref.dtype, mem))
        if mode.endswith("sync"):
            binding.synchronize_inputs()
        s.session.run_with_iobinding(binding)
        if mode.endswith("sync"):
            binding.synchronize_outputs()
        values = binding.get_outputs()
        for k, v in enumerate(values):
            if (v.device_name().lower() == "cpu") != host_out:
                where = f"output {k}: in {v.device_name()} memory, bound to the other side"
                return StepResult.checked("mismatch", where)
        check, detail = compare(
            binding.copy_outputs_to_cpu(), expected, self.rtol, self.atol, self.measure
        )
        if check == "ok":  # and the device outputs stayed on the profile's device
            placed = where_check(values, device_of(self, s.profile))
            check, detail = placed if placed[0] != "ok" else (check, detail)
        return StepResult.checked(check, detail)

    def op_feed(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        a, b = self.sessions[step["session"]], self.sessions[step["peer"]]
        feeds = self._feeds(index, a.session, step.get("dims", ()))
        first = self._reference(a.model, feeds)
        # Each input of b takes a's output of the same shape; b must take at least one.
        shapes = {tuple(y.shape): k for k, y in enumerate(first)}
        chain: dict[str, int] = {}
        for inp in b.session.get_inputs():
            dims = inp.shape
            for shape, k in shapes.items():
                fits = len(dims) == len(shape) and all(
                    not isinstance(d, int) or d == s for d, s in zip(dims, shape, strict=True)
                )
                if fits and "float" in inp.type:
                    chain[inp.name] = k
        if not chain or not same_backend(a.profile, b.profile):
            why = "is another EP configuration" if chain else "takes no output of it"
            return StepResult.skip(Skip.UNFIT, f"{step['peer']} {why}")
        mem = self._memory_info(a.profile)
        io = a.session.io_binding()
        for name, array in feeds.items():
            io.bind_cpu_input(name, array)
        for out in a.session.get_outputs():
            if mem is None:
                io.bind_output(out.name)
            else:
                io._iobinding.bind_output(out.name, bound_device(self, a.profile, mem))
        a.session.run_with_iobinding(io)
        handed = io.get_outputs()
        check, detail = where_check(handed, device_of(self, a.profile))
        if check != "ok":
            return StepResult.checked(check, detail)
        second = b.session.io_binding()
        rest = self._feeds(index + 1, b.session, step.get("dims", ()))
        for inp in b.session.get_inputs():
            if inp.name in chain:
                second.bind_ortvalue_input(inp.name, handed[chain[inp.name]])
                rest[inp.name] = first[chain[inp.name]]
            else:
                second.bind_cpu_input(inp.name, rest[inp.name])
        for out in b.session.get_outputs():
            second.bind_output(out.name)  # host: read through b's own data transfer
        b.session.run_with_iobinding(second)
        outputs = second.copy_outputs_to_cpu()
        check, detail = compare(
            outputs, self._reference(b.model, rest), self.rtol, self.atol, self.measure
        )
        return StepResult.checked(check, detail)
