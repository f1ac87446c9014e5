"""Facts about the machine a finding was made on, for a report bundle's `env.json`.

A bug ticket needs to say which onnxruntime, which EP library build (path and sha256: two builds
of one EP often share a file name), which OS, Python, CPU and GPU driver it was seen with. Every
probe here is best effort: a fact that cannot be found is `None` (or an empty list), never an
exception, because a report must still be written on a machine without `nvidia-smi` or `/proc`.

This module only reads; it does not run schedules or render anything but `summary()` lines.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from racefuzz.targets.model import Library, Target

_PROBE_TIMEOUT_S = 10.0


def sha256_of(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def ort_version() -> str | None:
    # Imported rather than read from metadata: onnxruntime ships under several distribution
    # names (onnxruntime, onnxruntime-gpu, onnxruntime-directml, ...), one import name.
    try:
        import onnxruntime

        return str(onnxruntime.__version__)
    except Exception:  # a broken install is a fact worth reporting, not a reason to fail
        return None


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def gpus() -> list[dict[str, str]]:
    """GPUs and their drivers: nvidia-smi, else the kernel drivers' version files."""
    out: list[dict[str, str]] = []
    text = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    for line in (text or "").splitlines():
        name, _, driver = line.partition(",")
        if name.strip():
            out.append({"vendor": "nvidia", "name": name.strip(), "driver": driver.strip()})
    if out:
        return out
    for vendor, path in (
        ("nvidia", "/proc/driver/nvidia/version"),
        ("amd", "/sys/module/amdgpu/version"),
    ):
        try:
            first = Path(path).read_text(encoding="utf-8").strip().splitlines()
        except OSError:
            continue
        if first:
            out.append({"vendor": vendor, "name": "", "driver": first[0].strip()})
    return out


def collect(target: Target) -> dict[str, Any]:
    """Everything `env.json` holds; JSON-friendly values only."""
    return {
        "racefuzz": _version("racefuzz"),
        "onnxruntime": ort_version(),
        "numpy": _version("numpy"),
        "target": {
            "name": target.name,
            "env": dict(target.env),
            "trace": target.trace,
            "adaptations": list(target.adaptations),
        },
        "libraries": [_library(lib) for lib in target.libraries],
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
            "machine": platform.machine(),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "cpu": {"model": cpu_model(), "count": os.cpu_count()},
        "gpus": gpus(),
    }


def _library(lib: Library) -> dict[str, Any]:
    out = {"name": lib.name, "path": str(lib.path), "sha256": sha256_of(lib.path)}
    if lib.forwards_to is not None:  # the real EP behind racefuzz's forwarding library
        out |= {"forwards_to": str(lib.forwards_to), "real_sha256": sha256_of(lib.forwards_to)}
    return out


def summary(env: Mapping[str, Any]) -> list[str]:
    """A few `key: value` lines for a report, from what `collect` returned (or env.json)."""
    os_ = env.get("os") or {}
    py = env.get("python") or {}
    cpu = env.get("cpu") or {}
    ray = env.get("ray") or {}
    lines = [f"Ray node: {ray.get('node')} ({ray.get('device') or '?'})"] if ray else []
    lines += [
        f"onnxruntime {env.get('onnxruntime') or '?'}, racefuzz {env.get('racefuzz') or '?'}, "
        f"numpy {env.get('numpy') or '?'}",
        f"OS: {os_.get('platform') or '?'} ({os_.get('machine') or '?'})",
        f"Python: {py.get('implementation') or '?'} {py.get('version') or '?'}",
        f"CPU: {cpu.get('model') or '?'}, {cpu.get('count') or '?'} logical cores",
    ]
    for gpu in env.get("gpus") or []:
        name = gpu.get("name") or gpu.get("vendor") or "GPU"
        lines.append(f"GPU: {name}, driver {gpu.get('driver') or '?'}")
    if not env.get("gpus"):
        lines.append("GPU: none found")
    for lib in env.get("libraries") or []:
        real = lib.get("forwards_to")
        path, sha = (real, lib.get("real_sha256")) if real else (lib.get("path"), lib.get("sha256"))
        lines.append(f"EP library {lib.get('name')}: {path} (sha256 {sha})")
    for change in (env.get("target") or {}).get("adaptations") or []:
        lines.append(f"Adapted by racefuzz: {change}")
    target_env = (env.get("target") or {}).get("env") or {}
    if target_env:
        lines.append("Target env: " + " ".join(f"{k}={v}" for k, v in target_env.items()))
    return lines
