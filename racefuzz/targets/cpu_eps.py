"""Built-in targets for real third-party plugin EPs that run on any x86-64 Linux machine:
`webgpu-cpu`, `openvino` (`openvino[as-intel]` on a CPU not Intel's) and `ggml`.

What each needs is fetched into racefuzz's cache by `racefuzz setup TARGET` (`setup`, through
`targets.fetch`), never installed: pinned wheels unpacked, and for webgpu-cpu Mesa's lavapipe
(a Vulkan driver on the CPU) from Debian bookworm-backports, unpacked with `dpkg -x`.

- `webgpu-cpu`: onnxruntime-ep-webgpu (Dawn) over lavapipe. ORT lists no GPU there and the EP
  takes GPU devices only, so racefuzz's forwarding library tells the EP the CPU device is a GPU
  (ORT still sees a CPU: the profiles select device type "cpu"). Debian's own Mesa (22.3) is
  refused by Dawn; bookworm-backports' (25) is not. Clustered by overlap, as on a real GPU.
- `openvino`: onnxruntime-ep-openvino on the CPU, in f32 (it computes in bf16 on CPUs with
  avx512_bf16, about 3e-3 off ORT's CPU EP). Its factory offers no device on a CPU whose vendor
  id is not Intel's: `openvino[as-intel]` tells it the CPU is Intel's, a test-only override
  stated in the target's description and adaptations.
- `ggml`: onnxruntime-ggml on the CPU. pip would move onnxruntime below 1.31 for it; its library
  loads under racefuzz's ORT when taken from the unpacked wheel.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

from racefuzz.errors import RacefuzzError
from racefuzz.targets import fetch, forwarding
from racefuzz.targets.gpu import two_profiles
from racefuzz.targets.model import FrozenMap, Library, Target

# (pip name, pinned version, the library inside the unpacked wheel)
WEBGPU_WHEEL = (
    "onnxruntime-ep-webgpu",
    "0.4.0",
    "onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so",
)
OPENVINO_WHEEL = (
    "onnxruntime-ep-openvino",
    "1.8.1",
    "onnxruntime_ep_openvino/libonnxruntime_providers_openvino_plugin.so",
)
GGML_WHEEL = ("onnxruntime-ggml", "0.2.0", "onnxruntime_ggml/lib/libonnxruntime_ggml.so")
LAVAPIPE = ("lavapipe", ("mesa-vulkan-drivers/bookworm-backports",))
WEBGPU_EP, OPENVINO_EP, GGML_EP = "WebGpuExecutionProvider", "OpenVINOExecutionProvider", "ggml"
INTEL = forwarding.VENDOR_IDS["intel"]
# Models whose every node each EP takes (`racefuzz doctor`, bench/results/real-eps.md).
_WEBGPU_MODELS = ("tiny", "mlp", "wide", "eltwise")
_OPENVINO_MODELS = ("tiny", "mlp", "wide", "conv", "eltwise")
_GGML_MODELS = ("tiny", "mlp", "wide", "eltwise")
# (rtol, atol) against ORT's CPU EP, from doctor's measured differences with room to spare; a
# routing or ordering bug is orders of magnitude beyond.
_WEBGPU_TOLERANCE = (1e-3, 1e-3)
_GGML_TOLERANCE = (1e-2, 1e-2)  # ggml's MatMul differs by up to 1.6e-3 on `wide`


def setup_names() -> tuple[str, ...]:
    return tuple(SETUPS)


def setup(name: str, report: fetch.Progress) -> None:
    """Fetch what target `name` needs (idempotent); its one-line error if it cannot."""
    base = name.partition("[")[0]
    if base not in SETUPS:
        known = ", ".join(SETUPS)
        raise RacefuzzError(f"racefuzz setup: no setup for target '{name}' (targets: {known})")
    SETUPS[base](report)


def _setup_webgpu(report: fetch.Progress) -> None:
    fetch.wheel(*WEBGPU_WHEEL[:2], report)
    root = fetch.debian_packages(*LAVAPIPE, report)
    _write_icd(root)
    forwarding.library("target 'webgpu-cpu'")


def _setup_openvino(report: fetch.Progress) -> None:
    fetch.wheel(*OPENVINO_WHEEL[:2], report)
    if cpu_vendor() != "GenuineIntel":
        forwarding.library("target 'openvino[as-intel]'")


def _setup_ggml(report: fetch.Progress) -> None:
    fetch.wheel(*GGML_WHEEL[:2], report)


SETUPS: dict[str, Callable[[fetch.Progress], None]] = {
    "webgpu-cpu": _setup_webgpu,
    "openvino": _setup_openvino,
    "ggml": _setup_ggml,
}


def _wheel_library(wheel: tuple[str, str, str], who: str, spec: str) -> Path:
    package, version, inside = wheel
    folder = fetch.wheel_dir(package, version)
    path = folder / inside
    if not fetch.complete(folder) or not path.is_file():
        raise RacefuzzError(
            f"{who} needs {package} {version} in racefuzz's cache: run `racefuzz setup {spec}`"
        )
    return path


def _lib_dir(root: Path) -> Path:
    return root / "usr" / "lib" / f"{platform.machine()}-linux-gnu"


def _icd_path(root: Path) -> Path:
    return root / "racefuzz_lvp_icd.json"


def _write_icd(root: Path) -> None:
    """Debian's lvp_icd.json names its driver by a relative path: ours names it absolutely."""
    icd = {
        "file_format_version": "1.0.0",
        "ICD": {"library_path": str(_lib_dir(root) / "libvulkan_lvp.so"), "api_version": "1.3.0"},
    }
    _icd_path(root).write_text(json.dumps(icd) + "\n", encoding="utf-8")


def _runtime_dir() -> Path:
    """An XDG_RUNTIME_DIR of racefuzz's own (Mesa warns, and may cache nothing, without one)."""
    path = fetch.store() / "xdg-runtime"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def cpu_vendor() -> str:
    """The CPU's vendor string (GenuineIntel, AuthenticAMD), '' where /proc/cpuinfo has none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return ""


def _forwarded(fwd: forwarding.Forwarding, who: str) -> Library:
    return Library(fwd.name, forwarding.library(who), forwards_to=fwd.real)


def webgpu_cpu_target() -> Target:
    who = "target 'webgpu-cpu'"
    real = _wheel_library(WEBGPU_WHEEL, who, "webgpu-cpu")
    root = fetch.debian_root(LAVAPIPE[0])
    if not fetch.complete(root) or not _icd_path(root).is_file():
        raise RacefuzzError(
            f"{who} needs Mesa's lavapipe in racefuzz's cache: run `racefuzz setup webgpu-cpu`"
        )
    libs = _lib_dir(root)
    fwd = forwarding.Forwarding("webgpu", real, cpu_type="gpu", preload=(libs / "libvulkan.so.1",))
    inherited = os.environ.get("LD_LIBRARY_PATH", "")
    env = {
        **fwd.env(),
        "VK_ICD_FILENAMES": str(_icd_path(root)),
        "VK_DRIVER_FILES": str(_icd_path(root)),
        # lavapipe's own dependencies, where Debian's backport needs newer ones (libdrm).
        "LD_LIBRARY_PATH": f"{libs}:{inherited}" if inherited else str(libs),
        "XDG_RUNTIME_DIR": str(_runtime_dir()),
    }
    return Target(
        name="webgpu-cpu",
        description=(
            f"onnxruntime-ep-webgpu {WEBGPU_WHEEL[1]} (Dawn) over Mesa's lavapipe Vulkan driver "
            "on the CPU, the EP told the CPU is a GPU"
        ),
        libraries=(_forwarded(fwd, who),),
        profiles=two_profiles("webgpu", "webgpu", WEBGPU_EP, device_type="cpu"),
        models=_WEBGPU_MODELS,
        env=FrozenMap(env),
        aliases=FrozenMap({"dml": "webgpu", "mgx": "webgpu-b"}),
        tolerance=_WEBGPU_TOLERANCE,
        cluster_by="overlap",  # one race on Dawn's shared device shows differently each run
        adaptations=(*fwd.adaptations(), f"Vulkan driver: Mesa lavapipe from {root}"),
    )


def openvino_target(as_intel: bool) -> Target:
    spec = "openvino[as-intel]" if as_intel else "openvino"
    who = f"target '{spec}'"
    real = _wheel_library(OPENVINO_WHEEL, who, spec)
    vendor = cpu_vendor()
    if not as_intel and vendor != "GenuineIntel":
        raise RacefuzzError(
            f"{who}: onnxruntime-ep-openvino offers no device on a CPU not Intel's (this one: "
            f"{vendor or 'unknown'}); target 'openvino[as-intel]' tells it the CPU is Intel's "
            "(a test-only override)"
        )
    # f32: on a CPU with avx512_bf16 OpenVINO would compute in bf16, ~3e-3 off ORT's CPU EP.
    options = {"load_config": json.dumps({"CPU": {"INFERENCE_PRECISION_HINT": "f32"}})}
    env: dict[str, str] = {}
    adaptations: tuple[str, ...] = ()
    library = Library("openvino", real)
    if as_intel:
        fwd = forwarding.Forwarding("openvino", real, cpu_vendor_id=INTEL)
        library, env, adaptations = _forwarded(fwd, who), fwd.env(), fwd.adaptations()
    told = ", told the CPU is Intel's (a test-only override)" if as_intel else ""
    return Target(
        name=spec,
        description=f"onnxruntime-ep-openvino {OPENVINO_WHEEL[1]} on the CPU in f32{told}",
        libraries=(library,),
        profiles=two_profiles("openvino", "openvino", OPENVINO_EP, "cpu", options),
        models=_OPENVINO_MODELS,
        env=FrozenMap(env),
        aliases=FrozenMap({"dml": "openvino", "mgx": "openvino-b"}),
        adaptations=adaptations,
    )


def ggml_target() -> Target:
    real = _wheel_library(GGML_WHEEL, "target 'ggml'", "ggml")
    return Target(
        name="ggml",
        description=f"onnxruntime-ggml {GGML_WHEEL[1]} on the CPU (its library, not its package)",
        libraries=(Library("ggml", real),),
        profiles=two_profiles("ggml", "ggml", GGML_EP, "cpu", {"device": "cpu"}, threads="1"),
        models=_GGML_MODELS,
        aliases=FrozenMap({"dml": "ggml", "mgx": "ggml-b"}),
        tolerance=_GGML_TOLERANCE,
    )
