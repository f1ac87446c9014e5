"""Which clusters are one bug: `CampaignState.mark_duplicate` after a shrink."""

from __future__ import annotations

from pathlib import Path

from racefuzz.campaign_state import CampaignState, FindingRecord
from racefuzz.outcome import Finding
from racefuzz.schedule import Op, Schedule, Step


def record(shape: str, minimal: Schedule, shrunk_to: str | None = None) -> FindingRecord:
    finding = Finding("crash", "run", "SIGSEGV", ("webgpu",), overlap=shape)
    rec = FindingRecord(finding, 1, 0.0, Path(f"{shape}.json"), minimal, None)
    rec.minimal, rec.shrunk_to = minimal, shrunk_to
    return rec


def race(create_thread: int, profiles: tuple[str, str]) -> Schedule:
    """`register; create s1; [create s2 || run s1]`, with `create s1` on either thread."""
    first, second = profiles
    return Schedule(
        2,
        (
            Step(0, Op.REGISTER, library="webgpu"),
            Step(create_thread, Op.CREATE, session="s1", profile=first, model="tiny"),
            Step(1 - create_thread, Op.CREATE, session="s2", profile=second, model="tiny", group=1),
            Step(create_thread, Op.RUN, session="s1", group=1),
        ),
    )


def state_of(*records: FindingRecord) -> CampaignState:
    state = CampaignState()
    for rec in records:
        state.findings[rec.cluster] = rec
    return state


def test_a_cluster_that_shrank_to_another_clusters_race_is_its_duplicate() -> None:
    # As on the H200: 'copy+create+run' lost its alloc and failed as 'create+run' does, with
    # its first create on the other thread, so the two minimal schedules differ.
    create_run = record("create+run", race(0, ("webgpu", "webgpu-b")))
    bystander = record("copy+create+run", race(1, ("webgpu-b", "webgpu")), "overlap|create+run")
    state = state_of(create_run, bystander)
    state.mark_duplicate(bystander)
    assert bystander.duplicate_of == "overlap|create+run" and bystander.verdict == "duplicate"
    state.mark_duplicate(create_run)
    assert create_run.duplicate_of is None and create_run.verdict == "new"


def test_without_that_only_the_same_minimal_schedule_makes_a_duplicate() -> None:
    create_run = record("create+run", race(0, ("webgpu", "webgpu-b")))
    elsewhere = record(
        "copy+create+run", race(1, ("webgpu-b", "webgpu")), "overlap|copy+create+run"
    )
    same = record("create+release", race(0, ("webgpu-b", "webgpu")))  # profiles swapped
    state = state_of(create_run, elsewhere, same)
    state.mark_duplicate(elsewhere)
    assert elsewhere.duplicate_of is None  # its race is its own: another thread layout
    state.mark_duplicate(same)
    assert same.duplicate_of == "overlap|create+run"
