"""A ticket bundle's repro.py replays a testbed bug on its own, and the fix makes it pass.

The bundle is made the way campaigns and `racefuzz shrink` make it (shrink_to_bundle), from a
real failing run; repro.py then runs in a virtualenv holding only onnxruntime and numpy.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_repro_script import _isolated_venv

from racefuzz.cli.shrink_command import shrink_to_bundle
from racefuzz.execute import executor
from racefuzz.execute.runner import Runner
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

S3 = Schedule(
    3,
    (
        Step(0, Op.REGISTER),
        Step(1, Op.CREATE, session="s1", profile="dml", model="mlp"),
        Step(2, Op.CREATE, session="s2", profile="mgx", model="mlp"),
        Step(0, Op.RUN, session="s2"),
        Step(1, Op.RUN, session="s1"),
        Step(2, Op.RELEASE, session="s2"),
    ),
    "b3",
)


@pytest.fixture(scope="module")
def bundle(testbed_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = load_target("testbed:B3")
    failing = executor.run(target, S3)
    finding = next(f for f in failing.findings if f.kind == "error" and f.op == "run")
    root = tmp_path_factory.mktemp("reports")
    result, folder = shrink_to_bundle(
        Runner(target),
        "testbed:B3",
        S3,
        finding,
        failing,
        root,
        budget_s=120,
    )
    assert [s.op for s in result.final.steps] == [Op.REGISTER, Op.CREATE, Op.CREATE, Op.RUN]
    return folder


def repro(bundle: Path, python: str, library: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(bundle / "repro.py"), str(library), "--times", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=bundle,
        # The caller's own RACEFUZZ_TESTBED_* would override the bundle's: start without them.
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("RACEFUZZ_TESTBED")},
            **env,
        },
    )


def test_repro_in_a_bare_venv_reproduces_the_bug_and_exits_1_and_0_on_the_fix(
    bundle: Path, testbed_library: Path, tmp_path: Path
) -> None:
    try:
        python = str(_isolated_venv(tmp_path / "venv"))
    except OSError as e:  # no symlinks (Windows without developer mode)
        pytest.skip(f"cannot build the isolated venv: {e}")
    buggy = repro(bundle, python, testbed_library)
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert buggy.stdout.splitlines()[-1] == "reproduced 3/3"
    fixed = repro(bundle, python, testbed_library, RACEFUZZ_TESTBED_BUGS="")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines()[-1] == "reproduced 0/3"


def test_the_bundle_holds_everything_a_ticket_needs(bundle: Path) -> None:
    names = {p.name for p in bundle.iterdir()}
    assert {"report.md", "schedule.json", "original.json", "repro.py", "env.json"} <= names
    report = (bundle / "report.md").read_text()
    assert "| # | thread 0 |" in report and "HIP failure" in report
    assert "racefuzz replay schedule.json --target testbed:B3" in report
