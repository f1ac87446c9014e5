"""The live dashboard fits the terminal it is drawn on: the newest events always show, the
cluster table never wraps a word letter by letter, and nothing is cut off the bottom."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from racefuzz.campaign import dashboard
from racefuzz.campaign.state import CampaignState, FindingRecord
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.model import Op, Schedule, Step

EVENTS = 30


def _state(clusters: int) -> CampaignState:
    state = CampaignState(seconds=600, jobs=2)
    for i in range(clusters):
        finding = Finding(
            "error",
            "run_bound",
            f"HIP failure N: invalid argument while binding output number {i} of the session",
            ("mgx",),
            step=3,
            origin="interleaving",
        )
        state.findings[finding.cluster + str(i)] = FindingRecord(
            finding,
            3,
            float(i),
            Path(f"findings/{i}.json"),
            Schedule(1, (Step(0, Op.REGISTER),)),
            None,
        )
    for name in ("mutate", "pct", "random", "swarm"):
        state.by_strategy[name] = {"schedules": 40, "new": 1}
    for i in range(EVENTS):
        state.log.append(f"[{i:6.1f}s] event number {i}: NEW error on run_bound: HIP failure")
        state.log_total += 1
    return state


def _draw(state: CampaignState, width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, record=True, color_system=None)
    console.print(dashboard.render(state, "racefuzz testbed", width, height))
    return console.export_text().rstrip("\n").splitlines()


@pytest.mark.parametrize(("width", "height"), [(80, 24), (130, 45)])
@pytest.mark.parametrize("clusters", [1, 12, 40])
def test_the_newest_event_shows_and_everything_fits(width: int, height: int, clusters: int) -> None:
    lines = _draw(_state(clusters), width, height)
    assert len(lines) < height, "\n".join(lines)
    assert all(len(line) <= width for line in lines)
    text = "\n".join(lines)
    assert f"event number {EVENTS - 1}:" in text  # the newest event, never the oldest cut first
    assert "event number 0:" not in text


@pytest.mark.parametrize(("width", "height"), [(80, 24), (130, 45)])
def test_cluster_cells_are_one_line_each_and_never_split_words(width: int, height: int) -> None:
    lines = _draw(_state(3), width, height)
    header = next(line for line in lines if "verdict" in line)
    assert re.search(r"\bverdict\b", header) and re.search(r"\bstate\b", header)
    rows = [line for line in lines if "run_bound" in line and "event" not in line]
    assert len(rows) == 3, "\n".join(lines)  # one line per cluster: nothing wrapped


def test_clusters_that_do_not_fit_are_counted_and_the_newest_shown() -> None:
    lines = _draw(_state(40), 80, 24)
    text = "\n".join(lines)
    title = re.search(r"finding clusters \((\d+) earlier in summary\.md\)", text)
    assert title is not None, text
    assert "39.0s" in text or "first" not in text  # the newest cluster is kept where shown


def test_narrow_terminals_drop_the_least_useful_columns_first() -> None:
    wide = [c.name for c in dashboard.columns_for(200)]
    narrow = [c.name for c in dashboard.columns_for(80)]
    assert wide == [c.name for c in dashboard.COLUMNS]
    assert {"verdict", "kind", "op", "message", "state"} <= set(narrow)
    assert "variants" not in narrow
