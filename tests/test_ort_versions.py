"""Every onnxruntime the pin admits works: the suite runs on the newest (what `pip install -e .`
picks), and this test builds a venv with the lowest and runs the README's first command in it
on a testbed switch, a replay and doctor.

The lowest version is read from pyproject.toml, so the test follows the pin when it moves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "schedules"

pytestmark = pytest.mark.slow


def lowest_admitted() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pin = re.search(r'"onnxruntime>=([0-9.]+),<[0-9.]+"', text)
    assert pin is not None, "the onnxruntime pin is not of the form >=A,<B"
    return pin.group(1)


@pytest.fixture(scope="module")
def lowest_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("ort-lowest") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    version = lowest_admitted()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"onnxruntime=={version}", "-e", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode != 0:
        pytest.skip(f"cannot install onnxruntime {version}: {install.stderr.strip()[-300:]}")
    return python


def racefuzz_in(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACEFUZZ_TESTBED")}
    return subprocess.run(
        [str(python), "-m", "racefuzz", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def test_the_lowest_onnxruntime_the_pin_admits_finds_replays_and_doctors(
    lowest_venv: Path, tmp_path: Path, testbed_library: Path
) -> None:
    version = lowest_admitted()
    shown = racefuzz_in(lowest_venv, "--version", cwd=tmp_path)
    assert shown.stdout.strip().endswith(f"(onnxruntime {version})"), shown.stdout + shown.stderr
    run = racefuzz_in(
        lowest_venv,
        *("run", "--target", "testbed:B3", "--seconds", "8", "--no-dashboard"),
        *("--out", str(tmp_path / "out"), "--no-shrink"),
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "HIP failure N: invalid argument" in run.stdout
    replay = racefuzz_in(
        lowest_venv,
        *("replay", str(SCHEDULES / "s3_two_sessions_dml_runs.json"), "--target", "testbed:B3"),
        cwd=tmp_path,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    doctor = racefuzz_in(lowest_venv, "doctor", "--target", "testbed", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"onnxruntime {version}" in doctor.stdout
