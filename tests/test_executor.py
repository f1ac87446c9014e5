"""The executor turns a real native crash or hang into a result, and moves on.

The testbed's RACEFUZZ_TESTBED_FAULT switch makes its Compute really block forever or really
dereference null on one backend; nothing here is simulated in Python.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from racefuzz.errors import InternalError
from racefuzz.execute import executor, native_stack
from racefuzz.execute.zygote_pool import ZygoteLauncher, available
from racefuzz.judge.outcome import Exit, RunResult
from racefuzz.schedule.json_io import save
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target

TWO_THREADS = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
        Step(0, Op.CREATE, session="s2", profile="mgx", model="tiny"),
        Step(1, Op.RUN, session="s1", group=1),
        Step(0, Op.RUN, session="s2", group=1),
        Step(1, Op.RUN, session="s1"),
    ),
    "fault",
)


# The crash test's other thread is parked in the sequencer when the segfault comes:
# faulthandler walking a thread that is running Python at that instant can read torn frames
# (seen once as garbage line numbers and one missing stack), which is not what is under test.
PARKED = Schedule(
    2,
    tuple(
        s if s.group is None else Step(s.thread, s.op, session=s.session) for s in TWO_THREADS.steps
    ),
    "fault",
)


def faulty(fault: str) -> Target:
    return load_target("testbed").with_env(RACEFUZZ_TESTBED_FAULT=fault)


def run_on(
    fast: bool,
    target: Target,
    schedule: Schedule,
    options: executor.RunOptions | None = None,
) -> RunResult:
    """One run, spawned or forked from a zygote (closed afterwards)."""
    if fast and not available():
        pytest.skip("no fork on this platform")
    launcher = ZygoteLauncher() if fast else None
    try:
        return executor.run(target, schedule, options, launcher=launcher)
    finally:
        if launcher is not None:
            launcher.close()


@pytest.fixture(scope="module", params=[False, True], ids=["spawn", "zygote"])
def segfault(request: pytest.FixtureRequest, testbed_library: Path) -> RunResult:
    """A real native segfault (every mgx Compute dereferences null), run once per launcher and
    read by several tests."""
    return run_on(bool(request.param), faulty("segv:mgx"), PARKED)


def test_a_native_segfault_names_the_ep_function_that_faulted(
    testbed_library: Path, segfault: RunResult
) -> None:
    if native_stack.tracer_library() is None:
        pytest.skip("no C compiler here: crash reports carry Python stacks only")
    r = segfault
    assert r.exit is Exit.CRASH and r.signal == "SIGSEGV"  # the tracer hands the signal on
    assert r.stacks.startswith(native_stack.HEADER)
    native, python = r.stacks.split("End of native stack", 1)
    # Named by addr2line from the testbed's symbol table; ORT's stripped library is not named
    # after its nearest export, it keeps its offsets.
    assert "testbed::TestbedEp::Compute(" in native and "libracefuzz_testbed.so+0x" in native
    assert "PyInit_onnxruntime_pybind11_state" not in native
    assert "Fatal Python error: Segmentation fault" in python and "op_run" in python
    assert native_stack.has_symbol_table(testbed_library)


def test_a_native_segfault_is_a_crash_with_every_threads_stack_and_the_steps_in_flight(
    segfault: RunResult,
) -> None:
    r = segfault
    assert r.exit is Exit.CRASH and r.signal == "SIGSEGV"
    assert r.in_flight == (4,)  # the mgx run, on thread 0; thread 1 waits for its next step
    (crash,) = [f for f in r.findings if f.kind == "crash"]
    assert crash.message == "SIGSEGV" and "mgx" in crash.profiles
    assert "Fatal Python error: Segmentation fault" in r.stacks
    assert r.stacks.count("Thread 0x") + r.stacks.count("Current thread 0x") >= 2
    assert "op_run" in r.stacks  # the Python frame of the step that was running
    assert [o.step for o in r.outcomes][:3] == [0, 1, 2]  # what came before is kept


@pytest.mark.slow
def test_a_native_hang_is_a_hang_within_its_timeout_and_the_worker_is_killed(
    testbed_library: Path,
) -> None:
    options = executor.RunOptions(step_timeout=3.0)
    t0 = time.monotonic()
    r = executor.run(faulty("hang:mgx"), TWO_THREADS, options)
    elapsed = time.monotonic() - t0
    assert r.exit is Exit.HANG
    assert elapsed < options.step_timeout + 8  # timeout, faulthandler grace, kill, cleanup
    (hang,) = [f for f in r.findings if f.kind == "hang"]
    assert hang.op == "run" and 4 in r.in_flight
    assert "Timeout (0:00:03)!" in r.stacks and "op_run" in r.stacks


@pytest.mark.parametrize("fast", [False, True], ids=["spawn", "zygote"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_worker_killed_from_outside_is_no_finding(
    testbed_library: Path, fast: bool, sig: signal.Signals
) -> None:
    ours = {p.pid for p in psutil.Process().children(recursive=True)}

    def kill_the_worker() -> None:
        time.sleep(2.0)  # parked in the hung mgx run by then
        for p in psutil.Process().children(recursive=True):
            # The worker, not a zygote: a zygote's fork is its child, never ours.
            if p.pid not in ours and (p.ppid() != os.getpid() or not fast):
                p.send_signal(sig)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    try:
        r = run_on(fast, faulty("hang:mgx"), TWO_THREADS, executor.RunOptions(step_timeout=30))
    finally:
        killer.join()
    assert r.exit is Exit.KILLED and r.signal == sig.name
    assert r.findings == ()  # a user, a CI timeout or the OOM killer: nothing about the EP


def test_replay_goes_on_with_the_next_schedule_after_a_crash(
    testbed_library: Path, tmp_path: Path
) -> None:
    save(TWO_THREADS, tmp_path / "a_crash.json")
    clean = Schedule(
        1,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
            Step(0, Op.RUN, session="s1"),
        ),
    )
    save(clean, tmp_path / "b_clean.json")
    env = {"RACEFUZZ_TESTBED_FAULT": "segv:mgx"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "racefuzz",
            "replay",
            str(tmp_path),
            "--target",
            "testbed",
            "--no-baseline",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, **env},
    )
    assert proc.returncode == 1, proc.stderr
    assert "fault: FINDINGS" in proc.stdout and "b_clean: clean" in proc.stdout
    assert "2 schedule(s) replayed x1, 1 with findings" in proc.stdout


@pytest.mark.parametrize("fast", [False, True], ids=["spawn", "zygote"])
def test_racefuzz_s_own_failure_after_steps_ran_is_an_internal_error_not_a_crash(
    testbed_library: Path, fast: bool
) -> None:
    # The second run fails as a racefuzz bug (RACEFUZZ_SELFTEST_INTERNAL), on thread 1, after
    # five steps finished: the worker says so and exits 70, which must not read as the EP's.
    target = load_target("testbed").with_env(RACEFUZZ_SELFTEST_INTERNAL="run")
    schedule = Schedule(
        2,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
            Step(0, Op.RUN_BOUND, session="s1"),
            Step(0, Op.COPY, profile="dml"),
            Step(1, Op.TERMINATE, session="s1"),
            Step(1, Op.RUN, session="s1"),
            Step(0, Op.RUN_BOUND, session="s1"),
        ),
        "internal",
    )
    with pytest.raises(InternalError) as raised:
        run_on(fast, target, schedule)
    assert "KeyError: \"RACEFUZZ_SELFTEST_INTERNAL asked this 'run'" in str(raised.value)
    assert "ops.py" in str(raised.value)  # the worker's traceback, of racefuzz's own frames
