"""Ops on kept device values that sessions read and write in place: `keep` (a session's device
output kept as a value), `bind` (a kept value bound as a session's input, the binding kept for
the next run: fixed buffers) and `upload` (new data written into a kept value).

These are the calls behind a family of public reports that fresh buffers per run never reach:
IOBinding reuse and CUDA-graph-style fixed buffers (onnxruntime#32673, #17336), an input updated
in place between runs (#32445), an output that outlives its session. A kept value's `data` is
always what the device should hold: `upload` replaces it, `keep` reads it back once.

Part of the worker's ops (`Runtime` mixes `KeptOps` in); imports only the stdlib, numpy,
onnxruntime and `base`/`handoff`/`protocol`, and `repro.py` embeds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from racefuzz.worker.base import Host, Session, Value, compare, own_code
from racefuzz.worker.handoff import bound_device, where_check
from racefuzz.worker.protocol import Skip, StepResult

own_code(__file__)

# Op -> the field of the session or value its handler makes (merged into ops.py's table).
MAKES = {"keep": "value"}


@dataclass
class KeptBinding:
    """The IOBinding a `bind` left on its session, for `bind [again]` to run as it is."""

    binding: Any
    value: str  # the kept value bound as `input`
    input: str
    shape: tuple[int, ...]
    feeds: dict[str, np.ndarray[Any, Any]]  # the other inputs, bound from host memory


def _first_float_input(session: Any) -> tuple[str, tuple[int, ...]] | None:
    for inp in session.get_inputs():
        if inp.type == "tensor(float)":
            return inp.name, tuple(d if isinstance(d, int) and d > 0 else 1 for d in inp.shape)
    return None


def _bind_raw(host: Host, binding: Any, name: str, v: Value, shape: tuple[int, ...]) -> None:
    """Binds the first elements of `v`'s buffer as input `name` of `shape`, in place: the run
    reads the kept value's own memory, whatever was last written into it."""
    if v.host_only:
        binding.bind_input(name, "cpu", 0, np.float32, list(shape), v.value.data_ptr())
        return
    device = bound_device(host, v.profile, host._memory_info(v.profile))
    binding._iobinding.bind_input(name, device, np.float32, list(shape), v.value.data_ptr())


def _bind_outputs(host: Host, s: Session, binding: Any) -> None:
    mem = host._memory_info(s.profile)
    for out in s.session.get_outputs():
        if mem is None:
            binding.bind_output(out.name)
        else:  # on the device, allocated by the session's own allocator
            binding._iobinding.bind_output(out.name, bound_device(host, s.profile, mem))


class KeptOps:
    def op_keep(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        s = self.sessions[step["peer"]]
        feeds = self._feeds(index, s.session, step.get("dims", ()))
        expected = self._reference(s.model, feeds)
        binding = s.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        _bind_outputs(self, s, binding)
        s.session.run_with_iobinding(binding)
        outputs = binding.get_outputs()
        # Read back through the session's own transfer: an env-level read (`OrtValue.numpy`)
        # is what `read` checks later.
        back = binding.copy_outputs_to_cpu()
        check, detail = compare(back, expected, self.rtol, self.atol, self.measure)
        if check != "ok":
            return StepResult.checked(check, detail)
        first = outputs[0]
        host = np.ascontiguousarray(back[0], dtype=np.float32)
        kept = Value(first, host, s.profile, self._memory_info(s.profile) is None)
        with self._lock:
            self.values[step["value"]] = kept
        where = None if kept.host_only else int(self._memory_info(s.profile).device_id)
        check, detail = where_check([first], where)
        return StepResult() if check == "ok" else StepResult.checked(check, detail)

    def op_bind(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        s, v = self.sessions[step["session"]], self.values[step["peer"]]
        kept: KeptBinding | None = s.kept
        if step.get("mode") == "again" and kept is not None and kept.value == step["peer"]:
            binding, name, shape, feeds = kept.binding, kept.input, kept.shape, kept.feeds
        else:
            fit = _first_float_input(s.session)
            if fit is None or int(np.prod(fit[1])) > v.data.size:
                why = "has no float input" if fit is None else f"needs {fit[1]}"
                return StepResult.skip(Skip.UNFIT, f"{step['session']} {why}")
            # In place: the value's own device and EP configuration. Another device's memory
            # would be copied by ORT at bind time, which `feed` and `run_bound` already reach.
            if v.profile.name != s.profile.name:
                return StepResult.skip(Skip.UNFIT, f"{step['peer']} is another profile's memory")
            name, shape = fit
            feeds = {
                k: a
                for k, a in self._feeds(index, s.session, step.get("dims", ())).items()
                if k != name
            }
            binding = s.session.io_binding()
            _bind_raw(self, binding, name, v, shape)
            for other, array in feeds.items():
                binding.bind_cpu_input(other, array)
            _bind_outputs(self, s, binding)
            s.kept = KeptBinding(binding, step["peer"], name, shape, feeds)
        inputs = {**feeds, name: v.data.reshape(-1)[: int(np.prod(shape))].reshape(shape)}
        expected = self._reference(s.model, inputs)
        s.session.run_with_iobinding(binding)
        check, detail = compare(
            binding.copy_outputs_to_cpu(), expected, self.rtol, self.atol, self.measure
        )
        return StepResult.checked(check, detail)

    def op_upload(self: Host, index: int, step: Mapping[str, Any]) -> StepResult:
        # Plain: copy_tensors with no stream, which ORT documents as done when it returns.
        # `stream`: on a new sync stream of the value's device, and nobody waits for it.
        v = self.values[step["value"]]
        rng = np.random.default_rng(self.seed * 1_000_003 + index)
        data = rng.standard_normal(v.data.shape).astype(np.float32)
        stream = None
        if step.get("mode") == "stream" and not v.host_only:
            try:
                stream = self._devices(v.profile)[0].create_sync_stream()
            except Exception as e:  # ORT: "The execution provider does not support streams."
                if "does not support streams" not in str(e):
                    raise
                return StepResult.skip(Skip.UNSUPPORTED, "the EP has no streams")
        # The source lives in the value's record: an upload in flight on `stream` reads it later.
        src = ort.OrtValue.ortvalue_from_numpy(data)
        self._copy(src, v.value, v.host_only, stream)
        with self._lock:
            v.data, v.source = data, (src, stream)
        return StepResult()
