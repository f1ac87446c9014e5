"""`share` (CreateSharedAllocator through ORT's C API) on the real testbed, and B14.

The fixed design keeps every block a replaced environment allocator handed out valid until it is
freed, whether the replacement comes before or after sessions and values of that device, on any
thread. B14 (after onnxruntime#32164/#32272: registering an allocator for a device removed the
one made before it) resets the device's environment pool for the newcomer: a value allocated
before the `share` can no longer be read. Only `share` makes a second environment allocator for
a device while its memory is alive, so the same schedule without it is clean.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from racefuzz.execute import executor
from racefuzz.judge.outcome import RunResult
from racefuzz.report import repro_script
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import models
from racefuzz.targets.registry import load_target

REGISTER = Step(0, Op.REGISTER)
CREATE = Step(0, Op.CREATE, session="s1", profile="mgx", model="mlp")
ALLOC = Step(0, Op.ALLOC, value="v1", profile="mgx")
SHARE = Step(0, Op.SHARE, profile="mgx")
READ = Step(0, Op.READ, value="v1")
STORY = Schedule(1, (REGISTER, CREATE, ALLOC, SHARE, READ), "b14")


def found(result: RunResult) -> set[tuple[str, str, str]]:
    return {(f.kind, f.op, f.message) for f in result.findings}


def test_the_fixed_design_keeps_memory_of_a_replaced_allocator(testbed_library: Path) -> None:
    steps = (
        REGISTER,
        Step(0, Op.SHARE, profile="mgx"),  # before any session: no backend chosen yet
        CREATE,
        ALLOC,
        Step(0, Op.ALLOC, value="v2", profile="mgx1"),
        Step(1, Op.SHARE, profile="mgx"),  # after sessions and values, on another thread
        Step(0, Op.SHARE, profile="mgx1"),
        READ,
        Step(0, Op.READ, value="v2"),
        Step(0, Op.RUN, session="s1"),
        Step(1, Op.RUN_BOUND, session="s1"),
        Step(0, Op.CREATE, session="s2", profile="mgx", model="tail"),  # after the share
        Step(0, Op.FEED, session="s1", peer="s2"),
        Step(0, Op.ALLOC, value="v3", profile="mgx"),
        Step(0, Op.READ, value="v3"),
        Step(0, Op.FREE, value="v1"),
    )
    result = executor.run(load_target("testbed"), Schedule(2, steps, "shared"))
    assert found(result) == set(), result.findings
    shares = [o for o in result.outcomes if o.step < len(steps) and steps[o.step].op is Op.SHARE]
    assert len(shares) == 3 and all(o.ok and not o.detail for o in shares), shares
    assert [o.check for o in result.outcomes if o.check] == ["ok"] * 6  # 3 reads, 3 runs


def test_b14_loses_a_value_only_when_its_allocator_is_replaced(testbed_library: Path) -> None:
    target = load_target("testbed:B14")
    assert found(executor.run(target, STORY)) == {
        ("error", "read", "HIP failure N: invalid resource handle")
    }
    without = Schedule(1, (REGISTER, CREATE, ALLOC, READ, Step(0, Op.RUN, session="s1")), "plain")
    assert found(executor.run(target, without)) == set()
    # Another device's allocator replaced: device 0's memory is untouched.
    other = Schedule(1, (REGISTER, CREATE, ALLOC, Step(0, Op.SHARE, profile="mgx1"), READ), "other")
    assert found(executor.run(target, other)) == set()


def test_share_is_skipped_where_the_ep_computes_in_host_memory() -> None:
    steps = (REGISTER, Step(0, Op.SHARE, profile="cpu"))
    result = executor.run(load_target("cpu"), Schedule(1, steps, "cpu"))
    assert not result.findings and "host memory" in result.outcomes[1].detail


def test_repro_compiles_its_helper_and_replays_b14(testbed_library: Path, tmp_path: Path) -> None:
    target = load_target("testbed:B14")
    (finding,) = executor.run(target, STORY).findings
    source = repro_script.repro_source(STORY, finding, target, {"mlp": models.model_bytes("mlp")})
    script = tmp_path / "repro.py"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), str(testbed_library), "--times", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "reproduced 2/2" in done.stdout, done.stdout + done.stderr
