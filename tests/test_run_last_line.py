"""The last lines of `racefuzz run` tell a new user what to do next: on the plain testbed (the
README's first command) the clusters it finds are its filed residual R1, and saying so beats a
bare "2 new clusters, exit 1"."""

from __future__ import annotations

import argparse
from pathlib import Path

from racefuzz.campaign import known_issues
from racefuzz.campaign.state import FindingRecord
from racefuzz.cli.run_command import _fixed_testbed_residual
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets import testbed
from racefuzz.targets.registry import load_target


def record(kind: str, op: str, message: str) -> FindingRecord:
    finding = Finding(kind, op, message, ("dml",), step=3, origin="interleaving")
    return FindingRecord(
        finding, 1, 0.0, Path("f.json"), Schedule(1, (Step(0, Op.REGISTER),)), None
    )


def args(known: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(known=known)


def test_r1_clusters_on_the_plain_testbed_are_said_to_be_expected(testbed_library: Path) -> None:
    target = load_target("testbed", None)
    filed = sorted(known_issues.load(testbed.KNOWN_ISSUES, "testbed"))
    kind, op, message = filed[0].split("|", 2)
    line = _fixed_testbed_residual(args(), target, [record(kind, op, message)])
    assert line == (
        "the 1 new cluster(s) are the fixed testbed's residual R1, expected (testbed/README.md); "
        f"--known {testbed.KNOWN_ISSUES} leaves them out"
    )


def test_anything_else_gets_no_such_line(testbed_library: Path) -> None:
    other = record("crash", "run", "SIGSEGV")
    assert _fixed_testbed_residual(args(), load_target("testbed", None), [other]) == ""
    r1 = record(*sorted(known_issues.load(testbed.KNOWN_ISSUES, "testbed"))[0].split("|", 2))
    assert _fixed_testbed_residual(args(), load_target("testbed:B3", None), [r1]) == ""
    assert _fixed_testbed_residual(args(Path("k.json")), load_target("testbed", None), [r1]) == ""
