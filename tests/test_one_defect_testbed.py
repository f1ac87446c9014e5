"""One defect reached through several ops is one bug to its user, so at most two clusters.

B19 is a SIGSEGV in one helper that every copy and launch calls (`shared::FindPool`): the op in
flight is run, run_bound, copy, read, feed, ... and the faulting frame is always the helper. B20
is one error message from one helper (`shared::CheckContext`) reached by the same ops. R1, the
fixed testbed's residual, is one routing defect seen from copy, read and run_bound. Each
campaign below is a real 50 s run on two jobs; the tests print (and record as junit properties)
how many clusters each defect opened and how many of those were marked duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cli import racefuzz

pytestmark = pytest.mark.slow  # end-to-end: campaigns, shrinks, real processes

KNOWN = Path(__file__).resolve().parents[1] / "testbed" / "known-issues.json"
CONTEXT_GONE = "the device context was destroyed by a session release"
GOAL = 2  # non-duplicate clusters per defect, after shrinking

Entry = dict[str, Any]

# (target, whether the R1 known issues are listed apart, which clusters are the defect's)
DEFECTS: dict[str, tuple[str, bool, Callable[[Entry], bool]]] = {
    "B19": ("testbed:B19", True, lambda f: f["kind"] == "crash" and f["message"] == "SIGSEGV"),
    "B20": ("testbed:B20", True, lambda f: f["kind"] == "error" and CONTEXT_GONE in f["message"]),
    # The fixed design: whatever it shows is R1 (test_campaign_testbed checks that).
    "R1": ("testbed", False, lambda f: True),
}


@dataclass(frozen=True)
class Clusters:
    defect: str
    code: int
    mine: list[Entry]  # the defect's clusters
    others: list[Entry]

    @property
    def distinct(self) -> list[Entry]:
        return [f for f in self.mine if not f["duplicate_of"]]

    def describe(self) -> str:
        rows = "; ".join(
            f"{f['kind']} on {f['op']} ({f['state']}"
            + (f", duplicate of {f['duplicate_of']})" if f["duplicate_of"] else ")")
            for f in self.mine
        )
        dups = len(self.mine) - len(self.distinct)
        return (
            f"{self.defect}: {len(self.mine)} clusters, {dups} marked duplicates, "
            f"{len(self.distinct)} distinct (goal <= {GOAL}): {rows}"
        )


@pytest.fixture(scope="module", params=sorted(DEFECTS))
def campaign(
    request: pytest.FixtureRequest, testbed_library: Path, tmp_path_factory: pytest.TempPathFactory
) -> Clusters:
    defect: str = request.param
    spec, known, is_mine = DEFECTS[defect]
    out = tmp_path_factory.mktemp(defect)
    # 50 s: R1 shows through read, run_bound, upload and bind, and each variant needs a
    # baseline before the shrinks that fold them together.
    args = ["--target", spec, "--seconds", "50", "--jobs", "2", "--seed", "1"]
    args += ["--no-dashboard", "--out", str(out)] + (["--known", str(KNOWN)] if known else [])
    proc = racefuzz("run", *args)
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, proc.stdout + proc.stderr
    folder = folders[0]
    found: list[Entry] = json.loads((folder / "findings.json").read_text())["findings"]
    result = Clusters(
        defect,
        proc.returncode,
        [f for f in found if is_mine(f)],
        [f for f in found if not is_mine(f)],
    )
    print(f"\n{result.describe()}")
    return result


def test_each_defect_is_found(campaign: Clusters, record_property: Any) -> None:
    record_property("clusters", len(campaign.mine))
    record_property("distinct", len(campaign.distinct))
    assert campaign.code == 1, campaign.describe()
    assert campaign.mine, [f["cluster"] for f in campaign.others]


def test_one_defect_is_at_most_two_clusters_after_shrinking(campaign: Clusters) -> None:
    assert campaign.mine and len(campaign.distinct) <= GOAL, campaign.describe()
