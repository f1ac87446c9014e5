"""repro.py ends a replay as racefuzz's executor does: a real native leak past the campaign's
memory ceiling is a leak again, and a replay killed from outside (SIGKILL, as a CI timeout or the
OOM killer sends) is no reproduction, whatever finding the bundle is about.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from racefuzz.execute import executor
from racefuzz.execute.executor import RunOptions
from racefuzz.judge.outcome import Exit, Finding
from racefuzz.report import bundle as bundles
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="RSS is read from /proc"),
]

RUNS = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="mgx", model="tiny"),
        *[Step(0, Op.RUN, session="s1")] * 12,
    ),
)


def _bundle(tmp_path: Path, fault: str, options: RunOptions) -> tuple[Path, Finding]:
    target = load_target("testbed").with_env(RACEFUZZ_TESTBED_FAULT=fault)
    run = executor.run(target, RUNS, options)
    (finding,) = run.findings
    folder = bundles.write_bundle(
        tmp_path, finding, RUNS, RUNS, run, target, "testbed", (1, 1), limits=options
    )
    return folder, finding


def test_a_leak_bundle_reproduces_the_leak(testbed_library: Path, tmp_path: Path) -> None:
    # Every run keeps 64 MiB: twelve pass a 500 MiB ceiling that a clean worker (~65 MiB) never
    # nears.
    options = RunOptions(max_rss_mb=500.0)
    folder, finding = _bundle(tmp_path, "leak:mgx", options)
    assert finding.kind == "leak"
    proc = subprocess.run(
        [sys.executable, str(folder / "repro.py"), str(testbed_library), "--times", "2"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "reproduced 2/2"
    assert "replay 1/2: REPRODUCED: leak with" in proc.stdout
    # The fixed design stays under the ceiling: no leak, nothing reproduced.
    fixed = subprocess.run(
        [sys.executable, str(folder / "repro.py"), str(testbed_library), "--times", "1"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "RACEFUZZ_TESTBED_FAULT": ""},
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "not reproduced: clean: all 14 steps ok" in fixed.stdout


def test_a_replay_killed_from_outside_is_not_a_reproduction(
    testbed_library: Path, tmp_path: Path
) -> None:
    # A hang bundle: the replay's child blocks in native code, and is SIGKILLed from outside
    # before the step timeout would have made it a hang.
    folder, finding = _bundle(tmp_path, "hang:mgx", RunOptions(step_timeout=2.0))
    assert finding.kind == "hang"
    args = [str(folder / "repro.py"), str(testbed_library), "--times", "1"]
    proc = subprocess.Popen(
        [sys.executable, *args, "--step-timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child = _replay_child(proc.pid)
    time.sleep(3)  # well into the hung run
    child.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert "replay 1/1: not reproduced: killed from outside (SIGKILL)" in out
    assert out.splitlines()[-1] == "reproduced 0/1"


def _replay_child(pid: int) -> psutil.Process:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in psutil.Process(pid).children():
            if "--child" in p.cmdline():
                return p
        time.sleep(0.05)
    raise AssertionError("repro.py started no replay")


def test_the_two_endings_are_what_racefuzz_calls_them(testbed_library: Path) -> None:
    target = load_target("testbed").with_env(RACEFUZZ_TESTBED_FAULT="leak:mgx")
    assert executor.run(target, RUNS, RunOptions(max_rss_mb=500.0)).exit is Exit.LEAK
    assert executor.run(load_target("testbed"), RUNS, RunOptions(max_rss_mb=500.0)).exit is (
        Exit.CLEAN
    )
