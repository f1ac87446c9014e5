"""`doctor`'s look inside a fresh process: register the libraries, list what ORT then sees,
and (given a `placement` job) which nodes of each model each profile's EP takes.

Run as `python -m racefuzz.worker.probe` with `{"libraries": {name: path}, "placement": job}` on
stdin; prints one JSON object. A separate process: loading a broken EP library may crash.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import onnxruntime as ort

from racefuzz.worker.placement import placement


def probe(libraries: dict[str, str], placement_job: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ort_version": ort.__version__,
        "providers": list(ort.get_available_providers()),
        "libraries": {},
        "devices": [],
    }
    for name, path in libraries.items():
        try:
            ort.register_execution_provider_library(name, path)
            out["libraries"][name] = "registered"
        except Exception as e:  # reported, not raised: this is a diagnosis
            out["libraries"][name] = f"{type(e).__name__}: {e}"
    for d in ort.get_ep_devices():
        mems = []
        for kind in (ort.OrtDeviceMemoryType.DEFAULT, ort.OrtDeviceMemoryType.HOST_ACCESSIBLE):
            try:
                mem = d.memory_info(kind)
                mems.append(str(mem.name) if mem is not None else None)
            except Exception as e:
                mems.append(f"error: {e}")
        out["devices"].append(
            {
                "ep_name": d.ep_name,
                "ep_vendor": d.ep_vendor,
                "device_type": d.device.type.name.lower(),
                "vendor_id": d.device.vendor_id,
                "device_id": d.device.device_id,
                "memory": mems,
            }
        )
    registered = all(state == "registered" for state in out["libraries"].values())
    if placement_job is not None and registered:
        out["placement"] = placement(placement_job, register=False)  # sessions all released
    for name in libraries:
        if out["libraries"][name] == "registered":
            ort.unregister_execution_provider_library(name)
    return out


if __name__ == "__main__":
    job = json.loads(sys.stdin.read())
    print(json.dumps(probe(job.get("libraries", {}), job.get("placement"))))
