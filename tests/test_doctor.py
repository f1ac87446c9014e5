"""`racefuzz doctor`: what a user runs when something is off with their EP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def doctor(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", "doctor", "--target", target],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "160"},
    )


def rows(stdout: str, *profiles: str) -> list[list[str]]:
    """The check table's rows of those profiles, as their cells' words."""
    return [
        line.split() for line in stdout.splitlines() if line.split()[:1] in [[p] for p in profiles]
    ]


@pytest.mark.slow
def test_doctor_on_the_fixed_testbed_shows_its_device_memory_and_every_pair_working(
    testbed_library: Path,
) -> None:
    proc = doctor("testbed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "onnxruntime 1.3" in proc.stdout and "library testbed: registered" in proc.stdout
    assert "RacefuzzTestbed" in proc.stdout and "RacefuzzTestbed GPU" in proc.stdout
    table = rows(proc.stdout, "dml", "mgx", "mgx1")
    # 3 profiles (dml, mgx, mgx1) x 4 models (tiny, mlp, wide, tail); create, run, run_bound in
    # each of its modes, copy in each of its modes, share: all ok.
    assert len(table) == 12 and all(row[3:8] == ["ok"] * 5 for row in table), table
    # ORT's record of graph assignment: the testbed takes every node of its models.
    placed = [row[2] for row in table]
    assert placed == ["2/2", "4/4", "4/4", "3/3"] * 3, placed
    # The largest differences from ORT's CPU EP, measured per pair, and a tolerance suggested.
    cells = [row[8:10] for row in table]
    assert all(float(a) < 1e-4 and float(r) < 1e-2 for a, r in cells), cells
    assert "suggested: rtol 0.0001, atol 0.0001" in " ".join(proc.stdout.split())
    # The table fits 100 columns whatever the terminal's width; what does not goes below it.
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100


@pytest.mark.slow
def test_doctor_names_a_profile_that_fails_alone(testbed_library: Path) -> None:
    proc = doctor("testbed:B6")  # the backend without an allocator hook breaks alone
    assert proc.returncode == 1
    mgx = rows(proc.stdout, "mgx")
    assert mgx and all("error" in row for row in mgx)
    # Every IOBinding mode of run_bound is tried: B6 breaks those that bind host memory (ORT
    # asks the backend for an allocator), and the note below the table names them.
    notes = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert any(line.startswith("[2] run_bound (host_in, host_in_sync): ") for line in notes)
    assert "fail alone" in proc.stdout


@pytest.mark.slow
def test_doctor_on_ort_s_own_cpu_ep_needs_no_library() -> None:
    proc = doctor("cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CPUExecutionProvider" in proc.stdout
    # Its memory is host memory: `share` has nothing to replace, and doctor says so, not that
    # an earlier step failed.
    table = rows(proc.stdout, "cpu", "cpu-1t")
    assert table and all(row[7:9] == ["skip", "[1]"] for row in table), table
    assert "[1] share: the EP computes in host memory" in proc.stdout.splitlines()
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
    (row,) = rows(proc.stdout, "p")
    assert row[3] == "error" and row.count("skip") == 2 and "ok" not in row, row
    lines = proc.stdout.splitlines()
    assert "[2] run: an earlier step failed" in lines  # no s1
    assert (
        "[3] run_bound (plain, host_in, host_in_sync, host_out, sync): an earlier step failed"
        in lines
    )
    # One pair in the table: one pair fails alone; the target's own problem is said apart.
    text = " ".join(proc.stdout.split())
    assert "1 of 1 profile/model pair(s) fail alone" in text, proc.stdout
    assert "problem: profile 'p': EP 'RacefuzzTestbed' has no npu device" in text, proc.stdout
    # A long error keeps its start, where ORT and the EP say what failed.
    first = next(line for line in lines if line.startswith("[1] create: "))
    assert not first.startswith("[1] create: …"), first


def test_a_long_doctor_message_keeps_its_start() -> None:
    from racefuzz.cli.doctor_command import _one_line

    text = "EP said: the device context is gone " + "detail " * 200
    cut = _one_line(text, most=40)
    assert cut == "EP said: the device context is gone deta…"


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


@pytest.mark.slow
def test_doctor_and_run_say_when_the_ep_computes_nothing_of_a_model(tmp_path: Path) -> None:
    # nxrt-ep-cpu takes every node of `tiny` and none of `conv`: ORT runs conv on its CPU EP.
    config = nxrt_config(tmp_path, '["tiny", "conv"]')
    proc = run_n(config, "doctor")
    tiny, conv = rows(proc.stdout, "p")
    assert tiny[2] == "2/2" and conv[2:4] == ["0/8", "[2]"], proc.stdout
    assert "[2] conv on p: nodes elsewhere: CPUExecutionProvider 8" in proc.stdout
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
