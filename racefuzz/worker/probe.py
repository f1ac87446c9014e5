"""`doctor`'s look inside a fresh process: register the libraries, list what ORT then sees.

Run as `python -m racefuzz.worker.probe` with `{"libraries": {name: path}}` on stdin; prints
one JSON object. Separate process because loading a broken EP library may crash.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import onnxruntime as ort


def probe(libraries: dict[str, str]) -> dict[str, Any]:
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
    for name in libraries:
        if out["libraries"][name] == "registered":
            ort.unregister_execution_provider_library(name)
    return out


if __name__ == "__main__":
    print(json.dumps(probe(json.loads(sys.stdin.read()).get("libraries", {}))))
