"""`racefuzz doctor`: what a user runs when something is off with their EP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def doctor(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", target],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "160"},
    )


def test_doctor_on_the_fixed_testbed_shows_its_device_memory_and_every_pair_working(
    testbed_library: Path,
) -> None:
    proc = doctor("testbed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "onnxruntime 1.3" in proc.stdout and "library testbed: registered" in proc.stdout
    assert "RacefuzzTestbed" in proc.stdout and "RacefuzzTestbed GPU" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("│ dml", "│ mgx"))]
    # 3 profiles (dml, mgx, mgx1) x 4 models (tiny, mlp, wide, tail)
    assert len(rows) == 12 and all(line.count(" ok ") == 5 for line in rows), rows
    # ORT's record of graph assignment: the testbed takes every node of its models.
    placed = [line.split("│")[3].strip() for line in rows]
    assert placed == ["2/2", "4/4", "4/4", "3/3"] * 3, placed


def test_doctor_names_a_profile_that_fails_alone(testbed_library: Path) -> None:
    proc = doctor("testbed:B6")  # the backend without an allocator hook breaks alone
    assert proc.returncode == 1
    mgx = [line for line in proc.stdout.splitlines() if line.startswith("│ mgx")]
    assert mgx and all("error" in line for line in mgx)
    assert "fail alone" in proc.stdout


def test_doctor_on_ort_s_own_cpu_ep_needs_no_library() -> None:
    proc = doctor("cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CPUExecutionProvider" in proc.stdout
    # Its memory is host memory: `share` has nothing to replace, and doctor says so, not that
    # an earlier step failed.
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│ cpu")]
    assert rows and all(
        line.rstrip(" │").endswith("skipped (the EP computes in host memory)") for line in rows
    ), rows
    assert "earlier step failed" not in proc.stdout


def test_doctor_says_skipped_not_ok_for_the_steps_after_a_failed_create(
    testbed_library: Path, tmp_path: Path
) -> None:
    config = tmp_path / "racefuzz.toml"
    # The testbed's device is a GPU: asking for an NPU makes every create fail.
    config.write_text(
        '[targets.npu]\nmodels = ["tiny"]\n'
        f'[targets.npu.libraries]\ntb = "{testbed_library}"\n'
        '[targets.npu.profiles.p]\nlibrary = "tb"\nep = "RacefuzzTestbed"\ndevice = "npu"\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", "npu", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("│ p ")]
    assert "error" in row and row.count("skipped") == 2 and " ok " not in row, row
    assert row.count("(an earlier step") == 2, row  # run and run_bound: no s1 (cells wrap)


def nxrt_config(tmp_path: Path, models: str) -> Path:
    import nxrt_ep_cpu

    config = tmp_path / "racefuzz.toml"
    config.write_text(
        f"[targets.n]\nmodels = {models}\n"
        f'[targets.n.libraries]\nnxrt = "{nxrt_ep_cpu.get_library_path()}"\n'
        '[targets.n.profiles.p]\nlibrary = "nxrt"\nep = "cpu_ep"\n'
    )
    return config


def run_n(config: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", *command, "--target", "n", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )


def test_doctor_and_run_say_when_the_ep_computes_nothing_of_a_model(tmp_path: Path) -> None:
    # nxrt-ep-cpu takes every node of `tiny` and none of `conv`: ORT runs conv on its CPU EP.
    config = nxrt_config(tmp_path, '["tiny", "conv"]')
    proc = run_n(config, "doctor")
    (tiny,) = [line for line in proc.stdout.splitlines() if line.startswith("│ p       │ tiny")]
    (conv,) = [line for line in proc.stdout.splitlines() if line.startswith("│ p       │ conv")]
    assert "2/2" in tiny and "0/8 (CPUExecutionProvider 8)" in conv, proc.stdout
    assert "runs no node of model 'conv' on its EP 'cpu_ep'" in proc.stdout
    run = run_n(config, "run", "--seconds", "2", "--no-dashboard", "--out", str(tmp_path))
    warned = [line for line in run.stderr.splitlines() if "warning" in line]
    assert warned == [
        "racefuzz: warning: profile 'p' runs no node of model 'conv' on its EP 'cpu_ep' "
        "(ORT placed them all elsewhere; `racefuzz doctor` shows where)"
    ], run.stderr


def test_a_profile_whose_ep_computes_no_model_is_refused_with_one_line(tmp_path: Path) -> None:
    config = nxrt_config(tmp_path, '["conv"]')
    run = run_n(config, "run", "--seconds", "5", "--no-dashboard", "--out", str(tmp_path / "o"))
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("racefuzz: error: profile 'p': EP 'cpu_ep' runs no node of any model")
    assert not (tmp_path / "o").exists()
