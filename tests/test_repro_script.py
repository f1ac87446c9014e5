"""repro.py replays a real finding stand-alone and says whether it reproduced, by exit code.

Findings here are real: a profile asks for an EP device that no library provides, so `create`
fails inside a real worker, through the nxrt-ep-cpu plugin library or ORT alone.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import runpy
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from racefuzz.execute import executor
from racefuzz.judge.outcome import Finding
from racefuzz.report.repro_parts import JUDGE_MODULES, literal
from racefuzz.report.repro_script import repro_source
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import models
from racefuzz.targets.builtin import cpu_target, nxrt_cpu_target
from racefuzz.targets.model import Library, Profile, Target
from racefuzz.worker import ops, sequencer

NXRT = nxrt_cpu_target()
LIBRARY = NXRT.libraries[0].path
GHOST_NXRT = Target(
    "ghost-nxrt",
    NXRT.libraries,
    (Profile("ghost", "nxrt", "no_such_ep", {}), *NXRT.profiles),
    ("tiny",),
    env={"RACEFUZZ_REPRO_PROBE": "from-target"},
)
BY_OVERLAP = replace(GHOST_NXRT, cluster_by="overlap")
FAILS = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s0", profile="nxrt", model="tiny"),
        Step(1, Op.CREATE, session="s1", profile="ghost", model="tiny"),
        Step(0, Op.RUN, session="s0"),
    ),
)


@pytest.fixture(scope="module")
def finding() -> Finding:
    run = executor.run(GHOST_NXRT, FAILS)
    assert [(f.kind, f.op) for f in run.findings] == [("error", "create")], run
    return run.findings[0]


def _write(folder: Path, schedule: Schedule, finding: Finding, target: Target) -> Path:
    blobs = {m: models.model_bytes(m) for m in schedule.models()}
    path = folder / "repro.py"
    path.write_text(repro_source(schedule, finding, target, blobs), encoding="utf-8")
    return path


def _run(
    script: Path, *args: str, python: str = sys.executable, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(script), *args],
        capture_output=True,
        text=True,
        cwd=script.parent,
        timeout=240,
        env=env,
    )


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory, finding: Finding) -> Path:
    return _write(tmp_path_factory.mktemp("repro"), FAILS, finding, GHOST_NXRT)


def test_a_real_error_reproduces_every_time_and_exits_1(script: Path) -> None:
    proc = _run(script, str(LIBRARY), "--times", "3")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "racefuzz repro: error in create: no EP device for profile '…' (no_such_ep)"
    assert lines[1:6] == [
        "#  thread 0                thread 1",
        "0  register",
        "1  create s0 (nxrt, tiny)",
        "2                          create s1 (ghost, tiny) <- failed",
        "3  run s0",
    ]
    assert lines[-1] == "reproduced 3/3"
    assert lines[-2].startswith("replay 3/3: REPRODUCED: error at step 2 (create): RuntimeError")


def test_a_library_named_like_any_platforms_library_file_works(
    script: Path, tmp_path: Path
) -> None:
    for name in ("ep.dll", "libep.dylib"):
        copy = tmp_path / name
        shutil.copyfile(LIBRARY, copy)
        proc = _run(script, "--library", f"nxrt={copy}", "--times", "1")
        assert proc.stdout.splitlines()[-1] == "reproduced 1/1", proc.stderr
        assert proc.returncode == 1


def test_a_finding_that_does_not_reproduce_exits_0(tmp_path: Path, finding: Finding) -> None:
    cpu = cpu_target()
    clean = Schedule(
        1,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="cpu", model="tiny"),
            Step(0, Op.RUN, session="s1"),
        ),
    )
    proc = _run(_write(tmp_path, clean, finding, cpu), "--times", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == [
        "replay 2/2: not reproduced: clean: all 3 steps ok",
        "reproduced 0/2",
    ]


def test_under_overlap_clustering_the_same_failure_after_the_group_reproduces(
    tmp_path: Path, finding: Finding
) -> None:
    grouped = FAILS.with_steps(replace(s, group=1) if s.op is Op.CREATE else s for s in FAILS.steps)
    found = replace(finding, overlap="create")
    proc = _run(_write(tmp_path, grouped, found, BY_OVERLAP), str(LIBRARY), "--times", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-2].startswith("replay 1/1: REPRODUCED: error at step 2")
    assert "(after the create overlap)" in proc.stdout


def test_under_overlap_clustering_another_failure_after_the_group_does_not_reproduce(
    tmp_path: Path, finding: Finding
) -> None:
    # Found as a wrong value of a run; this replay fails otherwise after the same overlap: the
    # webgpu shrink that counted such failures drifted onto another cluster's symptom.
    grouped = FAILS.with_steps(replace(s, group=1) if s.op is Op.CREATE else s for s in FAILS.steps)
    other = replace(finding, kind="zeroed", op="run", message="output N", overlap="create")
    proc = _run(_write(tmp_path, grouped, other, BY_OVERLAP), str(LIBRARY), "--times", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "replay 1/1: not reproduced: something else: error at step 2" in proc.stdout


@pytest.mark.parametrize(
    ("grouped", "overlap"),
    [
        # The ghost create (step 2) fails before the only overlap group (the run, step 3).
        (Op.RUN, "run"),
        # It fails inside a group of creates: the create race, not a copy+run one (on the H200 a
        # copy+release bundle counted the crashes of its create+run group before this).
        (Op.CREATE, "copy+run"),
    ],
)
def test_under_overlap_clustering_a_failure_outside_the_findings_race_does_not_reproduce(
    tmp_path: Path, finding: Finding, grouped: Op, overlap: str
) -> None:
    steps = FAILS.with_steps(replace(s, group=1) if s.op is grouped else s for s in FAILS.steps)
    other = replace(finding, overlap=overlap)
    proc = _run(_write(tmp_path, steps, other, BY_OVERLAP), str(LIBRARY), "--times", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "replay 1/1: not reproduced: something else: error at step 2" in proc.stdout


def test_a_missing_library_file_is_one_line_and_exit_2(script: Path) -> None:
    proc = _run(script, "/nonexistent/libep.so")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "repro.py: error: EP library '/nonexistent/libep.so' not found\n"


def test_with_no_argument_it_runs_the_library_racefuzz_recorded(script: Path) -> None:
    proc = _run(script, "--times", "1")
    assert proc.returncode == 1, proc.stderr
    assert "replay 1/1: REPRODUCED" in proc.stdout


def test_a_missing_library_argument_is_one_line_and_exit_2(
    tmp_path: Path, finding: Finding
) -> None:
    # The library racefuzz ran is not on this machine: the error names it, and the usage.
    gone = replace(GHOST_NXRT, libraries=(Library("nxrt", tmp_path / "gone" / "libep.so"),))
    proc = _run(_write(tmp_path, FAILS, finding, gone))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"repro.py: error: missing the path to EP library 'nxrt', and '{tmp_path}/gone/libep.so'"
        " is not here (usage: repro.py PATH_TO_EP_LIBRARY)\n"
    )


def test_a_target_with_two_libraries_wants_each_by_name(tmp_path: Path, finding: Finding) -> None:
    two = Target(
        "two",
        (NXRT.libraries[0], Library("other", LIBRARY)),
        GHOST_NXRT.profiles,
        ("tiny",),
    )
    proc = _run(_write(tmp_path, FAILS, finding, two), str(LIBRARY))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "repro.py: error: give each EP library as --library NAME=PATH (nxrt, other)\n"
    )


def test_a_target_without_libraries_takes_no_path(tmp_path: Path, finding: Finding) -> None:
    clean = Schedule(1, (Step(0, Op.REGISTER),))
    proc = _run(_write(tmp_path, clean, finding, cpu_target()), str(LIBRARY))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "repro.py: error: this schedule registers no EP library: give no library path\n"
    )


def test_parallel_replays_run_in_batches_and_report_in_order(script: Path) -> None:
    proc = _run(script, str(LIBRARY), "--times", "5", "--parallel", "3")
    assert proc.returncode == 1, proc.stderr
    replays = [x.split(":")[0] for x in proc.stdout.splitlines() if x.startswith("replay ")]
    assert replays == [f"replay {n}/5" for n in range(1, 6)]
    assert proc.stdout.splitlines()[-1] == "reproduced 5/5"


def test_bad_options_are_one_line_and_exit_2(script: Path) -> None:
    for args in (("--times", "0"), ("--parallel", "0"), ("--bogus",)):
        proc = _run(script, str(LIBRARY), *args)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("repro.py: error: ")


def test_every_argument_has_help(script: Path) -> None:
    proc = _run(script, "--help")
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "the EP library to replay against" in flat
    assert "seconds a step may take before the replay counts as a hang" in flat


def test_the_target_env_applies_only_where_the_caller_left_it_unset(script: Path) -> None:
    ns = runpy.run_path(str(script), run_name="repro")
    env = ns["child_env"]({"PATH": "/bin"})
    assert env["RACEFUZZ_REPRO_PROBE"] == "from-target" and env["PATH"] == "/bin"
    # Set, even to empty, by the caller: the caller wins (e.g. a testbed's fixed design).
    assert ns["child_env"]({"RACEFUZZ_REPRO_PROBE": ""})["RACEFUZZ_REPRO_PROBE"] == ""


def test_the_script_embeds_racefuzz_own_worker_code_unchanged(script: Path) -> None:
    ns = runpy.run_path(str(script), run_name="repro")
    assert ns["OPS_SOURCE"] == inspect.getsource(ops)
    judge = ns["JUDGE_SOURCES"]
    assert list(judge) == list(JUDGE_MODULES)
    assert all(judge[n] == inspect.getsource(importlib.import_module(n)) for n in judge)
    assert ns["SEQUENCER_SOURCE"] == inspect.getsource(sequencer)
    assert ns["LIBRARIES"] == ["nxrt"]
    assert set(ns["PROFILES"]) == {"ghost", "nxrt"}


def test_the_script_is_valid_python_3_10(tmp_path: Path) -> None:
    blobs = {"tiny": models.model_bytes("tiny")}
    finding = Finding("error", "create", 'a "quoted" \\ message', ("ghost",), 2, "raw")
    source = repro_source(FAILS, finding, GHOST_NXRT, blobs)
    ast.parse(source, feature_version=(3, 10))
    # and so is each module it embeds (racefuzz itself needs 3.11)
    ns = runpy.run_path(str(_write(tmp_path, FAILS, finding, GHOST_NXRT)))
    sources = [*ns["JUDGE_SOURCES"].values(), ns["OPS_SOURCE"], ns["WORKER_SOURCE"]]
    for text in sources:
        ast.parse(text, feature_version=(3, 10))


@given(st.text())
def test_literal_reads_back_as_the_same_text(text: str) -> None:
    assert ast.literal_eval(literal(text)) == text


def _isolated_venv(folder: Path) -> Path:
    """A fresh venv that can import onnxruntime and its dependencies, and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    import numpy
    import onnxruntime

    site = Path(onnxruntime.__file__).parent.parent
    # onnxruntime, numpy, and what onnxruntime's metadata requires, where installed.
    for name in ("onnxruntime", "numpy", "numpy.libs", "flatbuffers", "packaging", "google"):
        if (site / name).exists():
            os.symlink(site / name, Path(purelib) / name, target_is_directory=True)
    assert Path(numpy.__file__).parent.parent == site
    return python


def test_repro_runs_in_a_fresh_venv_with_only_onnxruntime_and_numpy(
    script: Path, tmp_path: Path
) -> None:
    try:
        python = _isolated_venv(tmp_path / "venv")
    except OSError as e:  # no symlinks (Windows without developer mode)
        pytest.skip(f"cannot build the isolated venv: {e}")
    probe = subprocess.run(
        [str(python), "-c", "import onnxruntime, numpy\nimport racefuzz"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "No module named 'racefuzz'" in probe.stderr
    proc = _run(script, str(LIBRARY), "--times", "2", python=str(python))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1] == "reproduced 2/2"


# A real crash in nxrt-ep-cpu 0.1.0.dev6 that racefuzz found (schedules/misuse/): the library
# unregistered on another thread while a session is alive, a second session there, and dropping
# the sessions at exit segfaults.
NXRT_CRASH = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="nxrt-b", model="tiny"),
        Step(1, Op.UNREGISTER),
        Step(0, Op.REGISTER),
        Step(1, Op.CREATE, session="s2", profile="nxrt-b", model="tiny"),
    ),
)


@pytest.mark.skipif(os.name == "nt", reason="the crash was found on Linux")
def test_a_real_crash_is_observed_attributed_to_teardown_and_its_stacks_shown(
    tmp_path: Path,
) -> None:
    run = executor.run(NXRT, NXRT_CRASH)
    assert [(f.kind, f.op, f.step) for f in run.findings] == [("crash", "teardown", 5)], run
    proc = _run(_write(tmp_path, NXRT_CRASH, run.findings[0], NXRT), str(LIBRARY), "--times", "2")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "5  teardown <- failed" in lines
    assert "replay 1/2: REPRODUCED: crash (SIGSEGV) with step 5 (teardown) in flight" in lines
    assert "    Fatal Python error: Segmentation fault" in lines
    assert lines[-1] == "reproduced 2/2"


def test_a_real_native_hang_of_the_child_is_observed_and_the_child_killed(
    tmp_path: Path, testbed_library: Path
) -> None:
    # The testbed's fault switch makes its Compute block forever: a real hang in native code.
    from racefuzz.targets.registry import load_target

    target = load_target("testbed").with_env(RACEFUZZ_TESTBED_FAULT="hang:mgx")
    schedule = Schedule(
        2,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="mgx", model="tiny"),
            Step(1, Op.RUN, session="s1"),
        ),
    )
    hang = Finding("hang", "run", "no progress", ("mgx",), 2, "hang")
    script = _write(tmp_path, schedule, hang, target)
    proc = _run(script, str(testbed_library), "--times", "1", "--step-timeout", "1")
    assert proc.returncode == 1, proc.stderr
    assert "replay 1/1: REPRODUCED: hang with step 2 (run) in flight" in proc.stdout
    assert "Timeout (0:00:01)!" in proc.stdout
