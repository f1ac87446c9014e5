"""Preflight's and `doctor`'s look inside a fresh process: register the libraries, list what ORT
then sees, then make the probe's own calls: the steps of `preflight.probe_schedule` after its
`register` (a session of each plugin profile and model created and released, then unregister),
noting which nodes of each model each profile's EP takes.

Run as `python -m racefuzz.worker.probe` with `{"libraries": {name: path}, "schedule": job}` on
stdin (`job`: `profiles`, `models` as a worker's, and `steps`, the schedule's steps as JSON; None:
nothing to create). Prints JSON lines, flushed as it goes, so that a probe that dies says how far
it got: `{"registered": {...}}` once every library is registered and the devices listed,
`{"step": i}` before step i, and `{"result": {...}}` at the end. A separate process: loading a
broken EP library, or using it, may crash.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import onnxruntime as ort

from racefuzz.worker.base import Profile
from racefuzz.worker.ops import Runtime

Emit = Callable[[dict[str, Any]], None]


def probe(libraries: dict[str, str], job: dict[str, Any] | None, emit: Emit) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ort_version": ort.__version__,
        "providers": list(ort.get_available_providers()),
        "libraries": {},
        "devices": [],
    }
    for name, path in libraries.items():  # the schedule's step 0, one library at a time
        try:
            ort.register_execution_provider_library(name, path)
            out["libraries"][name] = "registered"
        except Exception as e:  # reported, not raised: this is a diagnosis
            out["libraries"][name] = f"{type(e).__name__}: {e}"
    out["devices"] = [_device(d) for d in ort.get_ep_devices()]
    emit({"registered": out})
    if job is not None and all(state == "registered" for state in out["libraries"].values()):
        out["placement"] = _steps(libraries, job, emit)  # its last step unregisters
    else:
        for name, state in out["libraries"].items():
            if state == "registered":
                ort.unregister_execution_provider_library(name)
    return out


def _device(d: Any) -> dict[str, Any]:
    mems: list[str | None] = []
    for kind in (ort.OrtDeviceMemoryType.DEFAULT, ort.OrtDeviceMemoryType.HOST_ACCESSIBLE):
        try:
            mem = d.memory_info(kind)
            mems.append(str(mem.name) if mem is not None else None)
        except Exception as e:
            mems.append(f"error: {e}")
    return {
        "ep_name": d.ep_name,
        "ep_vendor": d.ep_vendor,
        "device_type": d.device.type.name.lower(),
        "vendor_id": d.device.vendor_id,
        "device_id": d.device.device_id,
        "memory": mems,
    }


def _steps(libraries: dict[str, str], job: dict[str, Any], emit: Emit) -> dict[str, Any]:
    """Steps 1.. of the probe's schedule; {profile: {model: {"eps": ..} | {"error": ..}}}."""
    profiles = {n: Profile.from_json(n, d) for n, d in job["profiles"].items()}
    runtime = Runtime(libraries, profiles, job["models"], record_placement=True)
    cells: dict[str, Any] = {}
    for i, step in enumerate(job["steps"][1:], start=1):
        emit({"step": i})
        outcome = runtime.step(i, step)
        if step["op"] != "create":
            continue
        cell: dict[str, Any] = {"error": outcome.message}
        if outcome.ok:
            try:
                cell = {"eps": runtime.placement(step["session"])}
            except Exception as e:  # reported, not raised: this is a diagnosis
                cell = {"error": f"{type(e).__name__}: {e}"}
        cells.setdefault(step["profile"], {})[step["model"]] = cell
    return cells


def _emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    job = json.loads(sys.stdin.read())
    _emit({"result": probe(job.get("libraries", {}), job.get("schedule"), _emit)})
