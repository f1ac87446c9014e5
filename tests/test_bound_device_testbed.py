"""Outputs ORT allocates through IOBinding go to the EP's memory, whatever its hardware device.

`RACEFUZZ_TESTBED_HARDWARE=npu` makes the testbed report its virtual devices as NPUs while its
memory stays GPU memory: `run_bound [host_in]` and `feed` bind outputs to an OrtDevice, which
must be the memory's (GPU), not the hardware device's (NPU, where ORT has no allocator).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnxruntime as ort

from racefuzz.execute import executor
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target
from racefuzz.worker import handoff


def npu_testbed() -> Target:
    base = load_target("testbed")
    profiles = tuple(replace(p, device_type="npu") for p in base.profiles)
    return replace(base, profiles=profiles).with_env(RACEFUZZ_TESTBED_HARDWARE="npu")


BOUND = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="mgx", model="mlp"),
        Step(0, Op.CREATE, session="s2", profile="mgx", model="tail"),
        Step(0, Op.RUN_BOUND, session="s1", mode="host_in"),
        Step(0, Op.RUN_BOUND, session="s1", mode="host_in_sync"),
        Step(0, Op.RUN_BOUND, session="s1"),  # outputs in values made from the memory info
        Step(0, Op.FEED, session="s1", peer="s2"),
        Step(0, Op.COPY, profile="mgx1"),
    ),
    "bound",
)


def test_outputs_are_bound_to_the_memory_device_not_the_hardware_device(
    testbed_library: Path,
) -> None:
    result = executor.run(npu_testbed(), BOUND)
    assert result.findings == (), result.findings
    assert [o.check for o in result.outcomes[3:8]] == ["ok"] * 5, result.outcomes


def test_the_memory_kind_is_read_from_the_environment_s_allocator(testbed_library: Path) -> None:
    ort.register_execution_provider_library("RacefuzzTestbed", str(testbed_library))
    try:
        devices = [d for d in ort.get_ep_devices() if d.ep_name == "RacefuzzTestbed"]
        mems = [d.memory_info(ort.OrtDeviceMemoryType.DEFAULT) for d in devices]
        assert [handoff.memory_kind(m) for m in mems] == ["gpu", "gpu"]
        # A memory no allocator serves has no kind to read: the hardware device's is used.
        nowhere = ort.OrtMemoryInfo.create_v2(
            "nowhere",
            ort.OrtMemoryInfoDeviceType.GPU,
            0x1234,
            7,
            ort.OrtDeviceMemoryType.DEFAULT,
            0,
            ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR,
        )
        assert handoff.memory_kind(nowhere) is None
    finally:
        ort.unregister_execution_provider_library("RacefuzzTestbed")
