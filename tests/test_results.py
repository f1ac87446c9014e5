"""The campaign summary's labels: a finding's origin as its baseline classified it, and
"unclassified" where no baseline ran (never filed under one of the two classes); and a resumed
folder's totals over its runs."""

from __future__ import annotations

import json
from pathlib import Path

from racefuzz.campaign.results import summary_markdown
from racefuzz.campaign.state import CampaignState, FindingRecord, Totals
from racefuzz.campaign.store import totals
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.model import Op, Schedule, Step

ONE_THREAD = Schedule(
    1,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="tiny"),
        Step(0, Op.RUN, session="s1"),
    ),
)


def record(tmp_path: Path, op: str, origin: str) -> FindingRecord:
    finding = Finding("error", op, f"failed in {op}", ("dml",), 2, origin=origin)
    path = tmp_path / f"{op}.json"
    return FindingRecord(finding, 1, 1.0, path, ONE_THREAD, None)


def test_origins_are_order_induced_fails_alone_or_unclassified(tmp_path: Path) -> None:
    state = CampaignState(seconds=10, jobs=1)
    for op, origin in (("run", "interleaving"), ("read", "alone"), ("copy", "")):
        rec = record(tmp_path, op, origin)
        state.findings[rec.cluster] = rec
    rows = {
        line.split("|")[2].strip(): line.split("|")[4].strip()
        for line in summary_markdown(
            state, tmp_path, {"target": "t"}, list(state.findings.values())
        ).splitlines()
        if line.startswith("| error")
    }
    # On a one-thread schedule too: "order-induced" says the order of calls did it (its
    # session alone is fine), not that threads interleaved.
    assert rows == {"run": "order-induced", "read": "fails alone too", "copy": "unclassified"}


def test_a_folders_totals_read_back_and_a_folder_from_before_them_counts_as_one_run(
    tmp_path: Path,
) -> None:
    assert totals(tmp_path) == Totals()
    (tmp_path / "findings.json").write_text('{"schedules": 395, "elapsed_s": 157.2}')
    assert totals(tmp_path) == Totals(1, 395, 157.2)
    kept = {"runs": 3, "schedules": 656, "seconds": 562.0, "crashes": 131, "hangs": 5}
    (tmp_path / "findings.json").write_text(json.dumps({"schedules": 0, "totals": kept}))
    assert totals(tmp_path) == Totals(3, 656, 562.0, 131, 5)
    (tmp_path / "findings.json").write_text('{"totals": {"runs": "many"}}')
    assert totals(tmp_path) == Totals()  # damaged: start counting again, never fail
