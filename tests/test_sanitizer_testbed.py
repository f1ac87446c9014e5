"""The sanitizer oracle end to end, for real: the testbed built with ASan and TSan, its runtime
preloaded into real worker processes, reports turned into findings, shrunk into a bundle whose
repro.py reproduces them. B9 and B10 are the bugs outputs never show; the fixed design stays
clean under both sanitizers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from racefuzz.cli.shrink_command import shrink_to_bundle
from racefuzz.execute import executor
from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import RunResult
from racefuzz.report import bundle as bundles
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import sanitizer
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sanitizer.available("address"), reason="no ASan runtime (libasan)"),
    pytest.mark.skipif(not sanitizer.available("thread"), reason="no TSan runtime (libtsan)"),
]

# Two dml sessions' runs released together on two threads: B9's inserts meet.
RACE = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="wide"),
        Step(1, Op.CREATE, session="s2", profile="dml", model="wide"),
        Step(0, Op.RUN, session="s1", group=1),
        Step(1, Op.RUN, session="s2", group=1),
    ),
    "race",
)
# A session released, then another created: B10's CreateEp reads the released EP.
UAF = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="mlp"),
        Step(0, Op.RELEASE, session="s1"),
        Step(0, Op.CREATE, session="s2", profile="mgx", model="mlp"),
        Step(0, Op.RUN, session="s2"),
    ),
    "uaf",
)
RACE_MESSAGE = "data race: CountLaunch ~ CountLaunch"


def first_failure(target: Target, schedule: Schedule, tries: int = 6) -> RunResult:
    for _ in range(tries):
        result = executor.run(target, schedule)
        if result.findings:
            return result
    return result


def test_b10_is_an_asan_finding_where_the_plain_build_looks_right(testbed_library: Path) -> None:
    plain = executor.run(load_target("testbed:B10"), UAF)
    assert plain.findings == () and all(o.ok for o in plain.outcomes)
    result = executor.run(load_target("testbed[asan]:B10"), UAF)
    (finding,) = result.findings
    assert (finding.kind, finding.op, finding.step) == ("asan", "create", 3)
    assert finding.message.startswith("heap-use-after-free: testbed::")
    assert "(freed in testbed::TestbedFactory::ReleaseEpImpl)" in finding.message
    assert all(o.ok for o in result.outcomes)  # every step that finished was right


def test_b9_is_a_tsan_finding_where_the_plain_build_looks_right(testbed_library: Path) -> None:
    plain = executor.run(load_target("testbed:B9"), RACE)
    assert plain.findings == () and all(o.ok for o in plain.outcomes)
    result = first_failure(load_target("testbed[tsan]:B9"), RACE)
    assert [(f.kind, f.op, f.message) for f in result.findings] == [("tsan", "run", RACE_MESSAGE)]
    assert all(o.ok for o in result.outcomes)


@pytest.mark.parametrize("flavour", ["asan", "tsan"])
def test_the_fixed_design_is_clean_under_the_sanitizer(flavour: str) -> None:
    target = load_target(f"testbed[{flavour}]")
    for schedule in (RACE, UAF, RACE):
        result = executor.run(target, schedule)
        assert result.findings == (), result.stderr_tail[-3000:]


def repro(bundle: Path, library: Path, cwd: Path, times: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(bundle / "repro.py"), str(library), "--times", str(times)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_an_asan_finding_shrinks_to_a_bundle_whose_repro_reproduces_it(tmp_path: Path) -> None:
    target = load_target("testbed[asan]:B10")
    noisy = Schedule(
        2,
        (*UAF.steps[:3], Step(1, Op.COPY, profile="dml"), *UAF.steps[3:]),
        "noisy",
    )
    failing = executor.run(target, noisy)
    (finding,) = failing.findings
    result, bundle = shrink_to_bundle(
        Runner(target),
        "testbed[asan]:B10",
        noisy,
        finding,
        failing,
        tmp_path,
        budget_s=60,
    )
    assert result.confirmed and result.reproduction == (20, 20)
    assert [s.op for s in result.final.steps] == [Op.REGISTER, Op.CREATE, Op.RELEASE, Op.CREATE]
    saved = json.loads((bundle / "finding.json").read_text(encoding="utf-8"))
    assert (
        saved["kind"] == "asan" and "ERROR: AddressSanitizer: heap-use-after-free" in saved["raw"]
    )
    proc = repro(bundle, target.libraries[0].path, tmp_path, times=3)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"REPRODUCED: asan: {finding.message}" in proc.stdout


def test_a_tsan_bundle_holds_the_report_and_its_repro_reproduces_it(tmp_path: Path) -> None:
    # Written straight from a failing run: a TSan worker costs over a second, too many for a
    # shrink inside the test suite (the campaign figures in bench/results/sanitizers.md do it).
    target = load_target("testbed[tsan]:B9")
    failing = first_failure(target, RACE)
    (finding,) = failing.findings
    bundle = bundles.write_bundle(
        tmp_path, finding, RACE, RACE, failing, target, "testbed[tsan]:B9", (1, 1)
    )
    assert "WARNING: ThreadSanitizer: data race" in (bundle / "report.md").read_text("utf-8")
    assert (bundle / "tsan.supp").read_bytes() == sanitizer.SUPPRESSIONS.read_bytes()
    proc = repro(bundle, target.libraries[0].path, tmp_path, times=2)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"REPRODUCED: tsan: {RACE_MESSAGE}" in proc.stdout
