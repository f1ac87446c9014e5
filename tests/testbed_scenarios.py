"""The seed's scenarios against the testbed EP, written as plain onnxruntime calls.

Every bug switch is read when the library loads, so each scenario runs in a fresh process:
`python tests/testbed_scenarios.py LIBRARY MODEL SCENARIO [ARG]` prints one JSON line,
`{"outcome": "ok" | "error" | "zeroed" | "mismatch", "message": ...}`, and a crash shows as the
process dying by a signal. `run_scenario()` does that from a test. The scenario functions
(`s1_...` to `s9_...` and the smallest repro of each switch) take a `Harness` and only call
onnxruntime through it, so racefuzz can take them as its corpus; they do not use racefuzz.

Outputs are checked against ORT's CPU EP on the same inputs (atol = rtol = 1e-5): all zeros where
the reference is not is `zeroed`, anything else off is `mismatch`; an exception from ORT is `error`.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

EP_NAME = "RacefuzzTestbed"
AMD_VENDOR_ID = 0x1002
INPUT_SHAPE = (4, 32)
OUTPUT_SHAPE = (4, 16)


def build_mixed(path: Path) -> None:
    """The same input and output as racefuzz's `mlp` with a Softmax in the middle, an op the testbed
    does not compute: the EP claims nothing (all or nothing) and the model runs on the CPU EP."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((32, 16)) / np.sqrt(32)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["h"]),
        helper.make_node("Softmax", ["h"], ["Y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(OUTPUT_SHAPE))],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


def build_gemm(path: Path) -> None:
    """An explicit Gemm with every attribute away from its default, then Relu: [4,32] -> [4,16]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    b = (rng.standard_normal((16, 32)) / np.sqrt(32)).astype(np.float32)  # used transposed
    c = (0.1 * rng.standard_normal((1, 16))).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["X", "B", "C"], ["g"], alpha=0.5, beta=2.0, transB=1),
        helper.make_node("Relu", ["g"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "gemm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(OUTPUT_SHAPE))],
        [numpy_helper.from_array(b, "B"), numpy_helper.from_array(c, "C")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


class ScenarioFailure(Exception):
    """Wrong data, without ORT raising: `kind` is "zeroed" or "mismatch"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def on_thread(fn: Callable[[], Any]) -> Any:
    """Runs `fn` on a new thread and returns its result (or raises its exception) here."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def in_parallel(fns: Sequence[Callable[[], Any]]) -> list[Any]:
    """Runs each fn on its own thread, released together at a barrier; the first error is raised."""
    barrier = threading.Barrier(len(fns))
    results: list[Any] = [None] * len(fns)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fns[i]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


class Harness:
    """Plain onnxruntime calls on one testbed library and one model, checked against the CPU EP."""

    def __init__(self, library: str, model: str) -> None:
        self.library = library
        self.model = model
        self._rng = np.random.default_rng(7)
        self._cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"])

    # -- registration and sessions ----------------------------------------------------------

    def register(self) -> None:
        ort.register_execution_provider_library(EP_NAME, self.library)

    def unregister(self) -> None:
        ort.unregister_execution_provider_library(EP_NAME)

    def device(self) -> Any:
        return next(d for d in ort.get_ep_devices() if d.ep_name == EP_NAME)

    def memory_info(self) -> Any:
        return self.device().memory_info(ort.OrtDeviceMemoryType.DEFAULT)

    def create(self, profile: str) -> ort.InferenceSession:
        so = ort.SessionOptions()
        so.add_provider_for_devices([self.device()], {"profile": profile})
        # enable_fallback=0: otherwise a failed construction, or an EP_FAIL from run(), makes
        # Python rebuild the session on the CPU EP and carry on, printing to stdout.
        return ort.InferenceSession(self.model, sess_options=so, enable_fallback=0)

    # -- checked operations -----------------------------------------------------------------

    def inputs(self) -> np.ndarray:
        return self._rng.standard_normal(INPUT_SHAPE).astype(np.float32)

    def check(self, x: np.ndarray, y: np.ndarray) -> None:
        ref = self._cpu.run(None, {"X": x})[0]
        if np.allclose(y, ref, atol=1e-5, rtol=1e-5):
            return
        if not np.any(y) and np.any(ref):
            raise ScenarioFailure("zeroed", "output is all zeros, the CPU reference is not")
        worst = float(np.abs(y - ref).max())
        raise ScenarioFailure("mismatch", f"output differs from the CPU reference by {worst:g}")

    def run(self, session: ort.InferenceSession) -> None:
        x = self.inputs()
        self.check(x, session.run(None, {"X": x})[0])

    def device_value(self, shape: Sequence[int]) -> ort.OrtValue:
        """Device memory from the environment's shared allocator (the factory's allocator)."""
        return ort.OrtValue.ortvalue_from_shape_and_type(
            list(shape), np.float32, memory_info=self.memory_info()
        )

    def upload(self, x: np.ndarray) -> ort.OrtValue:
        """A device value from the env allocator, filled with env-level copy_tensors."""
        value = self.device_value(x.shape)
        ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(x)], [value])
        return value

    def download(self, value: ort.OrtValue) -> np.ndarray:
        # Return our own array: OrtValue.numpy() of a value made by ortvalue_from_numpy is a view
        # that does not keep the memory alive once that OrtValue is gone.
        out = np.zeros(value.shape(), np.float32)
        ort.copy_tensors([value], [ort.OrtValue.ortvalue_from_numpy(out)])
        return out

    def copy_roundtrip(self) -> None:
        x = self.inputs()
        back = self.download(self.upload(x))
        if back.tobytes() != x.tobytes():
            raise ScenarioFailure("mismatch", "a host->device->host copy changed the bytes")

    def run_bound(self, session: ort.InferenceSession, output: str = "device") -> None:
        """IOBinding with a device-resident input; the output bound to the device (`device`) or to
        a device value from the env allocator (`value`); read back with copy_tensors."""
        x = self.inputs()
        binding = session.io_binding()
        binding.bind_ortvalue_input("X", self.upload(x))
        if output == "device":
            # IOBinding.bind_output takes no vendor id and our device is GPU of vendor 0x1002:
            # bind through the C binding with an explicit OrtDevice.
            device = ort.OrtDevice.make("gpu", 0, AMD_VENDOR_ID)._get_c_device()
            binding._iobinding.bind_output("Y", device)
        else:
            binding.bind_ortvalue_output("Y", self.device_value(OUTPUT_SHAPE))
        session.run_with_iobinding(binding)
        self.check(x, self.download(binding.get_outputs()[0]))


# --- the seed's scenarios (racefuzz's corpus) ---------------------------------------------------


def s1_mgx_then_dml(h: Harness) -> None:
    """AIRADSW-750: an MIGraphX session created, run and released, then a DirectML one."""
    h.register()
    s = h.create("mgx")
    h.run(s)
    del s
    gc.collect()  # ORT releases the EP with the last reference to the session
    d = h.create("dml")
    h.run(d)


def s2_dml_env_copies_then_run(h: Harness) -> None:
    """The 10D / OGA arm: env-level copy_tensors round trips next to a DirectML session."""
    h.register()
    d = h.create("dml")
    for _ in range(3):
        h.copy_roundtrip()
    h.run(d)


def s3_two_sessions_dml_runs(h: Harness) -> None:
    """Zhaeong's two-session case: both created, then the DirectML one runs first."""
    h.register()
    d = h.create("dml")
    m = h.create("mgx")
    h.run(d)
    h.run(m)


def _construct_concurrently(h: Harness) -> None:
    def build_and_run(profile: str) -> None:
        s = h.create(profile)
        h.run(s)
        h.run(s)

    in_parallel([lambda: build_and_run("dml"), lambda: build_and_run("mgx")])


def s4_concurrent_construction(h: Harness) -> None:
    """The concurrent repro: both sessions built at once on two threads, each run there."""
    h.register()
    _construct_concurrently(h)


def s5_create_main_run_workers(h: Harness) -> None:
    """Sessions created on the main thread, each run on its own worker thread."""
    h.register()
    d = h.create("dml")
    m = h.create("mgx")
    in_parallel([lambda: h.run(d), lambda: h.run(m)])


def s6_sequential_alternate(h: Harness) -> None:
    """The sequential two-session repro, runs alternating."""
    h.register()
    d = h.create("dml")
    h.run(d)
    m = h.create("mgx")
    h.run(m)
    h.run(d)
    h.run(m)


def s7_register_on_other_thread(h: Harness) -> None:
    """The EP library registered on a thread that creates no session."""
    on_thread(h.register)
    d = h.create("dml")
    m = h.create("mgx")
    h.run(d)
    h.run(m)


def s8_r1_env_copy_after_other_backend(h: Harness) -> None:
    """Residual R1: a device value made while the slot was dml, read back after an mgx CreateEp.
    Fails with the fixed design too (HIP failure 1: invalid argument): that is R1."""
    h.register()
    d = h.create("dml")
    x = h.inputs()
    value = h.upload(x)
    m = h.create("mgx")
    if h.download(value).tobytes() != x.tobytes():
        raise ScenarioFailure(
            "mismatch", "the device value read back differs from what was written"
        )
    del d, m


def s9_modelbench(h: Harness) -> None:
    """ModelBench AllGigapixel: 2 MIGraphX then 6 DirectML sessions, one after another."""
    h.register()
    for profile in ["mgx"] * 2 + ["dml"] * 6:
        s = h.create(profile)
        h.run(s)
        del s
        gc.collect()


SEED_SCENARIOS: dict[str, Callable[[Harness], None]] = {
    "S1": s1_mgx_then_dml,
    "S2": s2_dml_env_copies_then_run,
    "S3": s3_two_sessions_dml_runs,
    "S4": s4_concurrent_construction,
    "S5": s5_create_main_run_workers,
    "S6": s6_sequential_alternate,
    "S7": s7_register_on_other_thread,
    "S8": s8_r1_env_copy_after_other_backend,
    "S9": s9_modelbench,
}


# --- smaller scenarios: one session alone, the switches' smallest repros, lifecycle ----------


def alone(h: Harness, profile: str) -> None:
    """One session used alone on the main thread: plain runs only."""
    h.register()
    s = h.create(profile)
    for _ in range(3):
        h.run(s)


def alone_bound(h: Harness, profile: str) -> None:
    """One session alone on the main thread: plain runs, then IOBinding and env-level copies."""
    h.register()
    s = h.create(profile)
    h.run(s)
    h.copy_roundtrip()
    h.run_bound(s, "device")
    h.run_bound(s, "value")


def create_dml_create_mgx_run_dml(h: Harness) -> None:
    """The smallest repro of B3 and B4."""
    h.register()
    d = h.create("dml")
    m = h.create("mgx")
    h.run(d)
    del m


def run_on_worker(h: Harness, profile: str) -> None:
    """The smallest repro of B5 and B7: create on main, run on another thread."""
    h.register()
    s = h.create(profile)
    for _ in range(3):
        on_thread(lambda: h.run(s))


def concurrent_construction_tries(h: Harness, tries: str = "20") -> None:
    """S4 repeated up to `tries` times in one process; stops at the first failure (B8)."""
    h.register()
    for i in range(1, int(tries) + 1):
        try:
            _construct_concurrently(h)
        except ScenarioFailure as exc:
            raise ScenarioFailure(exc.kind, f"try {i}: {exc}") from exc
        except Exception as exc:
            raise RuntimeError(f"try {i}: {exc}") from exc


def correctness(h: Harness, profile: str) -> None:
    """Everything one profile offers, on the main thread and on workers, with no other backend."""
    h.register()
    s = h.create(profile)
    checks: list[Callable[[], None]] = [
        lambda: h.run(s),
        lambda: h.run_bound(s, "device"),
        lambda: h.run_bound(s, "value"),
        h.copy_roundtrip,
    ]
    for check in checks:
        check()
        on_thread(check)
    w = on_thread(lambda: h.create(profile))  # created on a worker, used on main and on workers
    h.run(w)
    on_thread(lambda: h.run(w))


def create_only(h: Harness, profile: str = "") -> None:
    """Creates one session with provider option `profile` (none at all when empty)."""
    h.register()
    so = ort.SessionOptions()
    so.add_provider_for_devices([h.device()], {"profile": profile} if profile else {})
    ort.InferenceSession(h.model, sess_options=so, enable_fallback=0)


def env_copy_before_session(h: Harness) -> None:
    """Env-level allocation and copy before any CreateEp: there is no backend yet. ORT does not
    raise on a failed plugin allocation (the value's data_ptr() is 0); the copy does."""
    h.register()
    value = h.device_value(INPUT_SHAPE)
    ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(h.inputs())], [value])


def lifecycle(h: Harness, profile: str) -> None:
    """Unregister while a session and a device value are alive, use and free them, re-register.

    After unregister ORT has dropped the registration-time DataTransfer, so env-level copies of
    the device value fail ("not found"); the session still runs, reads the value through IOBinding
    (its own DataTransfer copies the output to the host) and the value is freed safely."""
    h.register()
    s = h.create(profile)
    x = h.inputs()
    value = h.upload(x)
    h.unregister()
    h.run(s)
    binding = s.io_binding()
    binding.bind_ortvalue_input("X", value)
    binding.bind_output("Y")  # to the host
    s.run_with_iobinding(binding)
    h.check(x, binding.copy_outputs_to_cpu()[0])
    del binding, value, s
    gc.collect()
    h.register()
    s2 = h.create(profile)
    h.run(s2)
    h.run_bound(s2)
    h.unregister()
    del s2
    gc.collect()
    h.register()
    h.copy_roundtrip()


def release_then_create(h: Harness, profile: str) -> None:
    """B18: the only session released, then another created (the preflight probe's order)."""
    h.register()
    s = h.create(profile)
    h.run(s)
    del s
    gc.collect()
    h.run(h.create(profile))


def second_backend_copies(h: Harness) -> None:
    """B19 through an env-level copy: dml computes first, then a copy goes to mgx."""
    h.register()
    d = h.create("dml")
    h.run(d)
    m = h.create("mgx")
    h.copy_roundtrip()
    del d, m


def one_released_other_runs(h: Harness, profile: str) -> None:
    """B20: two sessions of one backend; the first released, the second run."""
    h.register()
    first = h.create(profile)
    second = h.create(profile)
    del first
    gc.collect()
    h.run(second)


def value_outlives_its_session(h: Harness, profile: str) -> None:
    """B20 through copies: a device value uploaded while a session lived, read after its release."""
    h.register()
    s = h.create(profile)
    x = h.inputs()
    value = h.upload(x)
    del s
    gc.collect()
    if h.download(value).tobytes() != x.tobytes():
        raise ScenarioFailure("mismatch", "the value read back differs from what was written")


SCENARIOS: dict[str, Callable[..., None]] = {
    **SEED_SCENARIOS,
    "alone": alone,
    "alone_bound": alone_bound,
    "create_dml_create_mgx_run_dml": create_dml_create_mgx_run_dml,
    "run_on_worker": run_on_worker,
    "concurrent_construction_tries": concurrent_construction_tries,
    "correctness": correctness,
    "create_only": create_only,
    "env_copy_before_session": env_copy_before_session,
    "lifecycle": lifecycle,
    "release_then_create": release_then_create,
    "second_backend_copies": second_backend_copies,
    "one_released_other_runs": one_released_other_runs,
    "value_outlives_its_session": value_outlives_its_session,
}


# --- running one scenario in a fresh process ---------------------------------------------------


@dataclass(frozen=True)
class Result:
    returncode: int
    outcome: str  # "ok", "error", "zeroed", "mismatch", or "crash" when the process died
    message: str
    stderr: str


def run_scenario(
    library: Path,
    model: Path,
    scenario: str,
    *args: str,
    bugs: Iterable[str] = (),
    trace: Path | None = None,
    timeout: float = 60.0,
) -> Result:
    """Runs one scenario in a fresh interpreter with the given switches (and trace file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACEFUZZ_TESTBED_")}
    env["RACEFUZZ_TESTBED_BUGS"] = ",".join(bugs)
    if trace is not None:
        env["RACEFUZZ_TESTBED_TRACE"] = str(trace)
    cmd = [sys.executable, __file__, str(library), str(model), scenario, *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return Result(proc.returncode, "crash", f"exit status {proc.returncode}", proc.stderr)
    parsed = json.loads(lines[-1])
    return Result(proc.returncode, parsed["outcome"], parsed["message"], proc.stderr)


def main(argv: Sequence[str]) -> None:
    library, model, name, *args = argv
    harness = Harness(library, model)
    try:
        SCENARIOS[name](harness, *args)
        outcome, message = "ok", ""
    except ScenarioFailure as exc:
        outcome, message = exc.kind, str(exc)
    except Exception as exc:
        outcome, message = "error", str(exc)
    print(json.dumps({"outcome": outcome, "message": message}), flush=True)
    sys.stderr.flush()
    # Skip interpreter teardown: sessions still alive must not turn a finished scenario into a
    # crash report while Python frees ORT objects in an arbitrary order.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
