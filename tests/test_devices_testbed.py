"""Several sessions and devices on the real testbed: `feed` (one session's device output run by
another session), profiles pinned to the second GPU (`mgx1`), the `misplaced` check, threading
options, and the switches B15 (per-session pools) and B16 (first device latched).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from racefuzz.execute import executor
from racefuzz.judge.outcome import RunResult
from racefuzz.report import repro_script
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import models
from racefuzz.targets.model import Profile
from racefuzz.targets.registry import load_target
from racefuzz.worker import handoff


def steps(*rest: Step) -> Schedule:
    return Schedule(1, (Step(0, Op.REGISTER), *rest), "devices")


def create(session: str, profile: str, model: str = "mlp") -> Step:
    return Step(0, Op.CREATE, session=session, profile=profile, model=model)


def feed(session: str, peer: str) -> Step:
    return Step(0, Op.FEED, session=session, peer=peer)


def run(session: str, op: Op = Op.RUN) -> Step:
    return Step(0, op, session=session)


def found(result: RunResult) -> set[tuple[str, str, str]]:
    return {(f.kind, f.op, f.message) for f in result.findings if f.kind != "misroute"}


FIXED = steps(
    create("s1", "mgx"),
    create("s2", "mgx", "tail"),
    create("s3", "mgx1", "tail"),
    feed("s1", "s2"),  # same device
    feed("s1", "s3"),  # device 0 to device 1: ORT copies across
    run("s3", Op.RUN_BOUND),  # env memory of device 1 (before dml takes the slot: R1)
    Step(0, Op.ALLOC, value="v1", profile="mgx1"),
    Step(0, Op.READ, value="v1"),
    create("s4", "dml"),
    create("s5", "dml", "tail"),
    feed("s4", "s5"),
    feed("s1", "s5"),  # another backend sharing the OrtDevice (R2): skipped, never fed
)


def test_the_fixed_testbed_feeds_across_sessions_and_devices(testbed_library: Path) -> None:
    result = executor.run(load_target("testbed"), FIXED)
    assert found(result) == set(), result.findings
    checks = {o.step: o.check for o in result.outcomes}
    assert [checks[i] for i in (4, 5, 6, 8, 11)] == ["ok"] * 5, result.outcomes
    skipped = result.outcomes[12]
    assert skipped.skipped == "unfit" and skipped.detail == "s5 is another EP configuration"


def test_b15_rejects_a_peer_sessions_output_only_when_fed(testbed_library: Path) -> None:
    target = load_target("testbed:B15")
    fed = executor.run(
        target, steps(create("s1", "mgx"), create("s2", "mgx", "tail"), feed("s1", "s2"))
    )
    assert found(fed) == {("error", "feed", "HIP failure N: invalid argument")}
    apart = steps(create("s1", "mgx"), create("s2", "mgx", "tail"), run("s1"), run("s2"))
    assert found(executor.run(target, apart)) == set()


def test_b16_runs_a_later_session_on_the_first_device(testbed_library: Path) -> None:
    target = load_target("testbed:B16")
    pinned = steps(create("s1", "mgx"), create("s2", "mgx1"), run("s2", Op.RUN_BOUND))
    assert found(executor.run(target, pinned)) == {
        ("error", "run_bound", "HIP failure N: invalid device ordinal")
    }
    same_device = steps(create("s1", "mgx"), create("s2", "mgx"), run("s2", Op.RUN_BOUND))
    alone = steps(create("s2", "mgx1"), run("s2", Op.RUN_BOUND))
    assert found(executor.run(target, same_device)) == found(executor.run(target, alone)) == set()


def test_repro_replays_a_feed(testbed_library: Path, tmp_path: Path) -> None:
    target = load_target("testbed:B15")
    schedule = steps(create("s1", "dml"), create("s2", "dml", "tail"), feed("s1", "s2"))
    failing = executor.run(target, schedule)
    (finding,) = [f for f in failing.findings if f.op == "feed"]
    names = sorted(schedule.models())
    source = repro_script.repro_source(
        schedule, finding, target, {m: models.model_bytes(m) for m in names}
    )
    script = tmp_path / "repro.py"
    script.write_text(source)
    args = [sys.executable, str(script), str(testbed_library), "--times", "2"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr


def test_where_check_names_a_value_on_another_device(testbed_library: Path) -> None:
    ort.register_execution_provider_library("RacefuzzTestbed", str(testbed_library))
    try:
        dev = next(d for d in ort.get_ep_devices() if d.ep_name == "RacefuzzTestbed")
        mem = dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
        value = ort.OrtValue.ortvalue_from_shape_and_type([2, 2], np.float32, memory_info=mem)
        host = ort.OrtValue.ortvalue_from_numpy(np.ones((2, 2), np.float32))
        assert handoff.dl_device(value) == (2, 0) and handoff.dl_device(host) == (1, 0)
        assert handoff.where_check([host, value], 0) == ("ok", "")
        assert handoff.where_check([value], 1) == (
            "misplaced",
            "value 0: on device 0, asked for device 1",
        )
        del value
    finally:
        ort.unregister_execution_provider_library("RacefuzzTestbed")


@pytest.mark.parametrize(
    ("pools", "mode"), [("global", "sequential"), ("session", "parallel"), ("global", "parallel")]
)
def test_threading_options_keep_runs_right(testbed_library: Path, pools: str, mode: str) -> None:
    base = load_target("testbed")
    mgx = base.profile("mgx")
    threaded = Profile(
        "mgx",
        mgx.library,
        mgx.ep_name,
        mgx.provider_options,
        mgx.device_type,
        mgx.vendor_id,
        2,
        mgx.session_config,
        thread_pools=pools,
        execution_mode=mode,
        inter_op_threads=2,
    )
    target = type(base)(base.name, base.libraries, (threaded,), base.models, base.env)
    result = executor.run(target, steps(create("s1", "mgx"), run("s1"), run("s1", Op.RUN_BOUND)))
    assert found(result) == set() and [o.check for o in result.outcomes[2:4]] == ["ok"] * 2
