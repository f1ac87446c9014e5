"""The built-in targets: `testbed[asan|tsan][:B1,..]`, `nxrt-cpu` and `cpu`.

- `testbed`: racefuzz's own plugin EP (`testbed/`), one virtual AMD GPU with two backends chosen
  per session by provider option `profile`; its profiles are named after them, `dml` and `mgx`,
  as in the seed. `testbed:B3,B4` switches bugs on through `RACEFUZZ_TESTBED_BUGS`, read by the
  library when it loads. Testbed targets trace: the worker sets `RACEFUZZ_TESTBED_TRACE`.
  `testbed[asan]` / `testbed[tsan]` (switches combine: `testbed[tsan]:B9`) is the same EP built
  with AddressSanitizer / ThreadSanitizer, its library declared so (`Library.sanitizer`).
- `nxrt-cpu`: a third-party plugin EP from PyPI (`nxrt-ep-cpu`), a real library racefuzz did not
  write. It defines no provider options (it accepts and ignores any), so its two profiles differ
  only in ORT's intra-op thread count; two sessions of one EP is what routing bugs need anyway.
- `cpu`: ORT's own CPUExecutionProvider, no library; a control that should never fail.
- `webgpu`, `nxrt-cuda`, `cuda`, `tensorrt`: real GPU EPs from PyPI (`targets.gpu`);
  `webgpu-cpu`, `openvino` (`openvino[as-intel]`), `ggml`: real EPs on any x86-64 Linux CPU,
  fetched by `racefuzz setup` (`targets.cpu_eps`).

Building the testbed library is not done here: `racefuzz.targets.testbed.library_path()` finds (or
builds) it, and is called only when a testbed target is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from racefuzz.errors import RacefuzzError
from racefuzz.targets import cpu_eps
from racefuzz.targets import gpu as gpu_targets
from racefuzz.targets.bug_switches import BUGS as BUGS
from racefuzz.targets.bug_switches import BUGS_ENV as BUGS_ENV
from racefuzz.targets.model import Library, Profile, Target
from racefuzz.targets.models import DEFAULT_MODELS as BUILTIN_MODELS
from racefuzz.targets.sanitizer import runtime as checked_runtime

TESTBED_EP = "RacefuzzTestbed"
AMD_VENDOR_ID = 0x1002
NXRT_EP = "cpu_ep"
CPU_EP = "CPUExecutionProvider"
# Testbed flavour -> the sanitizer it is built with (targets.testbed.FLAVOURS, not imported:
# that module builds native code and is loaded only when a testbed target is).
FLAVOURS: dict[str, str] = {"asan": "address", "tsan": "thread"}
# The ops the testbed computes are MatMul, Add, Relu and Mul: `conv` would run on ORT's CPU EP.
_TESTBED_MODELS = ("tiny", "mlp", "wide", "tail")
# (profile, backend, device): the seed's two backends on the testbed's first GPU; `mgx1` pins
# MIGraphX to its second (B16). No device index for dml and mgx keeps their JSON as it was.
_TESTBED_PROFILES = (("dml", "dml", None), ("mgx", "mgx", None), ("mgx1", "mgx", 1))
# nxrt-ep-cpu takes every node of the MLPs and none of `conv` (ORT's record of placement, shown
# by `racefuzz doctor`): a campaign on `conv` would test ORT's CPU EP, not nxrt's.
_NXRT_CPU_MODELS = ("tiny", "mlp", "wide")


def load(spec: str) -> Target:
    """A built-in target from its spec; the caller checked the part before ':' is built-in."""
    head, colon, _ = spec.partition(":")
    base, bracket, rest = head.partition("[")
    flavour = rest.removesuffix("]")
    if head == "openvino[as-intel]" and not colon:
        return cpu_eps.openvino_target(as_intel=True)
    if bracket and (base != "testbed" or not rest.endswith("]") or flavour not in FLAVOURS):
        known = ", ".join([*(f"testbed[{f}]" for f in FLAVOURS), "openvino[as-intel]"])
        raise RacefuzzError(f"unknown flavour in target '{spec}' (known: {known})")
    if base == "testbed":
        return testbed_target(parse_bugs(spec) if colon else (), flavour=flavour)
    if colon:
        raise RacefuzzError(f"target '{base}' takes no ':' arguments (got '{spec}')")
    if base == "nxrt-cpu":
        return nxrt_cpu_target()
    if base == "webgpu":
        return gpu_targets.webgpu_target()
    if base == "nxrt-cuda":
        return gpu_targets.nxrt_cuda_target()
    if base == "cuda":
        return gpu_targets.cuda_target()
    if base == "tensorrt":
        return gpu_targets.tensorrt_target()
    if base == "webgpu-cpu":
        return cpu_eps.webgpu_cpu_target()
    if base == "openvino":
        return cpu_eps.openvino_target(as_intel=False)
    if base == "ggml":
        return cpu_eps.ggml_target()
    assert base == "cpu", base
    return cpu_target()


def parse_bugs(spec: str) -> tuple[str, ...]:
    """`testbed:B4,b3` -> ("B3", "B4"): known names, upper-cased, deduplicated, in order."""
    return _canonical(spec.partition(":")[2].split(","), spec)


def _canonical(items: Sequence[str], spec: str) -> tuple[str, ...]:
    found: set[str] = set()
    for item in items:
        bug = item.strip().upper()
        if bug not in BUGS:
            known = ", ".join(BUGS)
            raise RacefuzzError(f"unknown testbed bug '{item}' in '{spec}' (known: {known})")
        found.add(bug)
    return tuple(b for b in BUGS if b in found)


def testbed_target(
    bugs: Sequence[str] = (), library_path: Path | None = None, flavour: str = ""
) -> Target:
    """The testbed with `bugs` switched on, built plain or in a sanitizer `flavour`;
    `library_path` None asks `racefuzz.targets.testbed`."""
    bugs = _canonical(bugs, "testbed:" + ",".join(bugs))
    sanitizer = FLAVOURS[flavour] if flavour else None
    if sanitizer is not None:
        checked_runtime(sanitizer)  # before a build that could not run anyway
    if library_path is None:
        # Imported by name: the testbed package builds native code and is optional here.
        testbed = importlib.import_module("racefuzz.targets.testbed")
        library_path = Path(testbed.library_path(flavour=flavour))
    base = f"testbed[{flavour}]" if flavour else "testbed"
    name = f"{base}:" + ",".join(bugs) if bugs else base
    switched = ", ".join(bugs) if bugs else "none (the seed's final design, residual R1 only)"
    profiles = tuple(
        Profile(
            name=name,
            library="testbed",
            ep_name=TESTBED_EP,
            provider_options={"profile": backend},
            device_type="gpu",
            vendor_id=AMD_VENDOR_ID,
            # The testbed computes everything itself: ORT's intra-op pool has no work, and
            # letting it spin after each run only burned half of every worker's CPU (bench/).
            session_config={"session.intra_op.allow_spinning": "0"},
            device_index=device,
        )
        for name, backend, device in _TESTBED_PROFILES
    )
    return Target(
        name=name,
        description=f"racefuzz's testbed EP, a virtual AMD GPU; bugs: {switched}",
        libraries=(Library("testbed", library_path, sanitizer),),
        profiles=profiles,
        models=_TESTBED_MODELS,
        # Always set, even empty, so a value left in the user's shell cannot switch bugs on.
        env={BUGS_ENV: ",".join(bugs)},
        trace=True,
        backend_option="profile",
    )


def nxrt_cpu_target() -> Target:
    try:
        import nxrt_ep_cpu
    except ImportError:
        raise RacefuzzError(
            "target 'nxrt-cpu' needs the package nxrt-ep-cpu (pip install nxrt-ep-cpu)"
        ) from None
    try:
        path = Path(nxrt_ep_cpu.get_library_path())
    except FileNotFoundError as e:
        raise RacefuzzError(f"target 'nxrt-cpu': {' '.join(str(e).split())}") from None
    if not path.is_file():
        raise RacefuzzError(f"cannot load EP library '{path}': no such file")
    profiles = (
        Profile("nxrt", "nxrt", NXRT_EP, {}, device_type="cpu"),
        Profile("nxrt-b", "nxrt", NXRT_EP, {}, device_type="cpu", intra_op_threads=1),
    )
    return Target(
        name="nxrt-cpu",
        description="the nxrt-ep-cpu plugin EP from PyPI",
        libraries=(Library("nxrt", path),),
        profiles=profiles,
        models=_NXRT_CPU_MODELS,
        aliases={"dml": "nxrt", "mgx": "nxrt-b"},
    )


def cpu_target() -> Target:
    profiles = (
        Profile("cpu", None, CPU_EP, {}, device_type="cpu"),
        Profile("cpu-1t", None, CPU_EP, {}, device_type="cpu", intra_op_threads=1),
    )
    return Target(
        name="cpu",
        description="onnxruntime's own CPUExecutionProvider, a control that should not fail",
        libraries=(),
        profiles=profiles,
        models=BUILTIN_MODELS,
        aliases={"dml": "cpu", "mgx": "cpu-1t"},
    )
