"""A preflight probe that crashes after registering is a finding, not bad input.

B18 makes the testbed's CreateEp segfault after the last session was released: the probe's own
second create. `racefuzz run` then files the probe's calls as a crash finding (exit 1, shrunk,
bundled); a library that cannot be registered at all stays one line and exit 2.
"""

from __future__ import annotations

import _ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import toml_target
from test_cli import one_error_line, racefuzz

from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Schedule, Step
from racefuzz.targets import preflight
from racefuzz.targets.registry import load_target


def _calls(schedule: Schedule) -> list[tuple[str, str | None]]:
    """Each step's op and profile: what a shrink keeps of the probe's calls (it may pick
    another model and rename sessions)."""
    return [(str(s.op), s.profile) for s in schedule.steps]


def _is_subsequence(small: list[tuple[str, str | None]], big: list[tuple[str, str | None]]) -> bool:
    rest = iter(big)
    return all(call in rest for call in small)


def test_the_probe_reports_where_it_died_and_the_target_passes_with_a_warning(
    testbed_library: Path,
) -> None:
    target = load_target("testbed:B18")
    seen = preflight.probe(target)
    assert "error" not in seen and seen["libraries"] == {"testbed": "registered"}
    died = seen["died"]
    assert died["how"] == "died by SIGSEGV"
    step: Step = preflight.probe_schedule(target).steps[died["step"]]
    assert (str(step.op), step.session) == ("create", "s2")  # the create after a release
    assert preflight.died(target) == died
    assert preflight.problems(target, seen) == []
    [warning] = preflight.check(target)
    assert "the preflight probe died by SIGSEGV after registering, in step 3" in warning


def test_the_fixed_testbed_probe_makes_all_its_calls(testbed_library: Path) -> None:
    target = load_target("testbed")
    seen = preflight.probe(target)
    assert "died" not in seen and preflight.died(target) is None
    creates = [s for s in preflight.probe_schedule(target).steps if str(s.op) == "create"]
    assert len(preflight.on_ep(target, seen)) == len(creates) == 12  # 3 profiles x 4 models


@pytest.mark.slow
def test_run_files_the_probe_crash_as_a_shrunk_bundled_finding(
    testbed_library: Path, tmp_path: Path
) -> None:
    # 25 s: on a loaded machine the probe crash's shrink needs more than 10 s to end in a bundle.
    args = ("--target", "testbed:B18", "--seconds", "25", "--no-dashboard", "--out", str(tmp_path))
    proc = racefuzz("run", *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "as a schedule: crash on create, a finding" in proc.stdout
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    found = json.loads((folder / "findings.json").read_text())["findings"]
    [crash] = [f for f in found if f["kind"] == "crash"]
    assert (crash["op"], crash["message"]) == ("create", "SIGSEGV"), crash
    # Its first member is the probe's own calls, up to the create that crashed.
    probe = preflight.probe_schedule(load_target("testbed:B18"))
    first = load(folder / crash["original"])
    assert first.name == preflight.PROBE_SCHEDULE
    assert first.steps == probe.steps[: len(first.steps)]
    assert crash["bundle"], crash["state"]
    minimal = load(folder / crash["bundle"] / "schedule.json")
    assert len(minimal.steps) <= len(first.steps)
    assert _is_subsequence(_calls(minimal), _calls(first)), minimal
    assert _calls(minimal)[-1] == ("create", "dml")


def test_a_library_that_is_no_ep_is_still_one_line_and_exit_2(tmp_path: Path) -> None:
    if getattr(_ctypes, "__file__", None) is None:
        pytest.skip("_ctypes is built into this Python")
    not_an_ep = Path(_ctypes.__file__)  # a real shared library, without CreateEpFactories
    config = toml_target(tmp_path, not_an_ep, "ZEP")
    out = tmp_path / "out"
    line = one_error_line(
        racefuzz("run", "--config", str(config), "--target", "mine", "--out", str(out))
    )
    assert "cannot register EP library 'lib'" in line and "CreateEpFactories" in line
    assert not out.exists()


def test_a_library_that_crashes_while_registering_is_one_line_and_exit_2(tmp_path: Path) -> None:
    # Nothing was registered, so there is no EP to fuzz: bad input, not a finding.
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or sys.platform != "linux":
        pytest.skip("builds a Linux shared library with the system C compiler")
    source = tmp_path / "crashing_ep.c"
    source.write_text(
        "void *CreateEpFactories(void) { volatile int *p = 0; *p = 1; return 0; }\n"
        "void *ReleaseEpFactory(void) { return 0; }\n"
    )
    library = tmp_path / "libcrashing_ep.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    config = toml_target(tmp_path, library, "Crashing")
    line = one_error_line(racefuzz("run", "--config", str(config), "--target", "mine"))
    assert "failed: probe process failed (exit -11)" in line, line
