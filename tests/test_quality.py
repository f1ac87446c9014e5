"""The codebase stays as the standards say: mypy --strict and ruff clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_mypy_strict_is_clean_on_the_package_and_the_benchmarks() -> None:
    proc = run("mypy", "--strict", "racefuzz", "bench")
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_ruff_lint_and_format_are_clean() -> None:
    lint = run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout[-4000:]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    item = readme.split("2. Install the test extras", 1)[1]
    command = item.split("`", 4)[3]  # the second code span: the first names .ci/run
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci == command
