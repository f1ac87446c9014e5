"""Built-in targets for real GPU EPs from PyPI: `webgpu`, `nxrt-cuda`, `cuda` and `tensorrt`.

- `webgpu`: `onnxruntime-ep-webgpu` (Dawn; on Linux through Vulkan, so it needs the Vulkan loader
  `libvulkan.so.1` and a GPU whose driver provides Vulkan).
- `nxrt-cuda`: `nxrt-ep-cuda` (CUDA 13; its runtime libraries come as `nvidia-*` wheels, found
  here and put on the workers' `LD_LIBRARY_PATH` before they start; the driver, `libcuda.so.1`,
  comes with the machine).

- `cuda`, `tensorrt`: ORT's own CUDA and TensorRT EPs from `onnxruntime-gpu` (which replaces the
  CPU `onnxruntime` wheel). Their provider libraries are registered as EP libraries: ORT wraps a
  provider-bridge library in an `OrtEpFactory` (its automatic EP selection does the same), so
  sessions get them through `add_provider_for_devices` and device memory, copies and streams go
  through the same ABI as for a plugin EP. TensorRT also needs NVIDIA's TensorRT libraries.

Each finds its library through its package's `get_library_path()`, and says in one line what is
missing: the package, the loader, the driver. Whether a GPU is there is then preflight's question
(the EP lists no GPU device without one). Two profiles per EP, one with a single intra-op thread,
so sessions of both shapes share the device; `dml`/`mgx` alias them for the seed's scenarios.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from racefuzz.errors import RacefuzzError
from racefuzz.targets.model import FrozenMap, Library, Profile, Target

WEBGPU_EP = "WebGpuExecutionProvider"
NXRT_CUDA_EP = "cuda_ep"
# Models each EP takes whole (every node on the GPU), as ORT's record of placement shows
# (`racefuzz doctor`, bench/results/gpu.md).
_WEBGPU_MODELS = ("tiny", "mlp", "wide", "eltwise")
_NXRT_CUDA_MODELS = ("eltwise",)
CUDA_EP = "CUDAExecutionProvider"
# ORT's CUDA EP computes every op of the built-in models.
_CUDA_MODELS = ("tiny", "mlp", "wide", "conv", "eltwise")
TENSORRT_EP = "TensorrtExecutionProvider"  # it takes no MatMul: the MLPs would run on ORT's CPU EP
# Measured (gpu.md): GPU float maths differs from ORT's CPU EP by reassociation and fused
# multiply-add, well inside these; a routing or ordering bug is orders of magnitude beyond.
_GPU_TOLERANCE = (1e-3, 1e-3)  # rtol, atol
_TF32_TOLERANCE = (1e-2, 1e-2)


def package_library(module: str, pip_name: str, who: str, pre: bool = False) -> Path:
    """The EP library a package ships, through its `get_library_path()`; `who` starts the
    error line (e.g. "target 'webgpu'")."""
    try:
        package = importlib.import_module(module)
    except ImportError:
        flag = " --pre" if pre else ""
        raise RacefuzzError(
            f"{who} needs the package {pip_name} (pip install{flag} {pip_name})"
        ) from None
    try:
        path = Path(package.get_library_path())
    except (AttributeError, OSError, RuntimeError) as e:
        why = " ".join(str(e).split())
        raise RacefuzzError(f"{who}: {module}.get_library_path(): {why}") from None
    if not path.is_file():
        raise RacefuzzError(f"{who}: its library '{path}' does not exist")
    return path


def require_shared_library(name: str, what: str, who: str) -> None:
    """One line naming `what` is missing when `name` cannot be loaded (Linux only); `who`
    starts the line, as in `package_library`."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(name)
    except OSError:
        raise RacefuzzError(f"{who} needs {what} ({name} not found)") from None


def nvidia_library_path() -> str:
    """The `lib` folders of the installed `nvidia-*` wheels (CUDA runtime, cuBLAS, cuDNN...),
    ahead of the inherited LD_LIBRARY_PATH."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    folders = sorted(str(p) for root in roots for p in Path(root).glob("*/lib") if p.is_dir())
    inherited = os.environ.get("LD_LIBRARY_PATH", "")
    return ":".join([*folders, inherited] if inherited else folders)


def two_profiles(
    name: str,
    library: str,
    ep: str,
    device_type: str = "gpu",
    options: dict[str, str] | None = None,
    **second: str,
) -> tuple[Profile, ...]:
    """Two profiles of one EP on `device_type`, the second with one intra-op thread (and the
    EP's own options `second` on top of `options`), so sessions of both shapes share the EP."""
    first = options or {}
    return (
        Profile(name, library, ep, first, device_type=device_type),
        Profile(
            f"{name}-b",
            library,
            ep,
            {**first, **second},
            device_type=device_type,
            intra_op_threads=1,
        ),
    )


def webgpu_target() -> Target:
    path = package_library("onnxruntime_ep_webgpu", "onnxruntime-ep-webgpu", "target 'webgpu'")
    require_shared_library(
        "libvulkan.so.1",
        "the Vulkan loader (Debian/Ubuntu: apt install libvulkan1) and a GPU with a Vulkan driver",
        "target 'webgpu'",
    )
    return Target(
        name="webgpu",
        description="onnxruntime-ep-webgpu (Dawn over Vulkan) from PyPI",
        libraries=(Library("webgpu", path),),
        profiles=two_profiles("webgpu", "webgpu", WEBGPU_EP),
        models=_WEBGPU_MODELS,
        aliases=FrozenMap({"dml": "webgpu", "mgx": "webgpu-b"}),
        tolerance=_GPU_TOLERANCE,
        # Measured on an H200: one race of two sessions on Dawn's shared device shows as a
        # crash, "Device is lost", an encoder error or a wrong output, differently each run.
        cluster_by="overlap",
    )


def nxrt_cuda_target() -> Target:
    path = package_library("nxrt_ep_cuda", "nxrt-ep-cuda", "target 'nxrt-cuda'", pre=True)
    require_shared_library("libcuda.so.1", "an NVIDIA GPU and its driver", "target 'nxrt-cuda'")
    return Target(
        name="nxrt-cuda",
        description="the nxrt-ep-cuda plugin EP (CUDA 13) from PyPI",
        libraries=(Library("nxrt", path),),
        profiles=two_profiles("cuda", "nxrt", NXRT_CUDA_EP),
        models=_NXRT_CUDA_MODELS,
        env=FrozenMap({"LD_LIBRARY_PATH": nvidia_library_path()}),
        aliases=FrozenMap({"dml": "cuda", "mgx": "cuda-b"}),
        tolerance=_GPU_TOLERANCE,
    )


def ort_provider_library(ep: str, file: str, who: str) -> Path:
    """A provider library of ORT's own GPU build (`onnxruntime-gpu`), beside its Python module;
    one line when the installed onnxruntime is the CPU wheel."""
    import onnxruntime as ort

    path = Path(ort.__file__).parent / "capi" / file
    if ep not in ort.get_available_providers() or not path.is_file():
        raise RacefuzzError(
            f"{who} needs onnxruntime-gpu in place of onnxruntime {ort.__version__} "
            "(pip install -e '.[cuda]', then pip uninstall -y onnxruntime and "
            "pip install --force-reinstall --no-deps 'onnxruntime-gpu>=1.31.1,<1.33')"
        )
    return path


def cuda_target() -> Target:
    who = "target 'cuda'"
    path = ort_provider_library(CUDA_EP, "libonnxruntime_providers_cuda.so", who)
    require_shared_library("libcuda.so.1", "an NVIDIA GPU and its driver", who)
    return Target(
        name="cuda",
        description="onnxruntime-gpu's CUDA EP, registered as an EP library",
        libraries=(Library("cuda", path),),
        # The second profile takes ORT's other arena growth, so the two differ in how the
        # device memory they share is carved up, as two applications' sessions would.
        profiles=two_profiles("cuda", "cuda", CUDA_EP, arena_extend_strategy="kSameAsRequested"),
        models=_CUDA_MODELS,
        env=FrozenMap({"LD_LIBRARY_PATH": nvidia_library_path()}),
        aliases=FrozenMap({"dml": "cuda", "mgx": "cuda-b"}),
        # Measured on an H200 (doctor, onnxruntime-gpu 1.31.1): MatMuls in TF32, ORT's default,
        # differ from the CPU EP by up to 1.9e-3; a race's zeros or garbage are far beyond 1e-2.
        tolerance=_TF32_TOLERANCE,
    )


def tensorrt_target() -> Target:
    who = "target 'tensorrt'"
    path = ort_provider_library(TENSORRT_EP, "libonnxruntime_providers_tensorrt.so", who)
    require_shared_library("libcuda.so.1", "an NVIDIA GPU and its driver", who)
    require_shared_library(
        "libnvinfer.so.10", "NVIDIA TensorRT 10 (pip install tensorrt-cu13-libs)", who
    )
    return Target(
        name="tensorrt",
        description="onnxruntime-gpu's TensorRT EP, registered as an EP library",
        libraries=(Library("tensorrt", path),),
        profiles=two_profiles("trt", "tensorrt", TENSORRT_EP),
        models=_CUDA_MODELS,
        env=FrozenMap({"LD_LIBRARY_PATH": nvidia_library_path()}),
        aliases=FrozenMap({"dml": "trt", "mgx": "trt-b"}),
        tolerance=_GPU_TOLERANCE,
    )
