"""Which clusters are one bug: `CampaignState.mark_duplicate` after a shrink, and which
schedule reproduces it (`CampaignState.adopt`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from racefuzz.campaign import store as campaign_store
from racefuzz.campaign.state import AloneUnderOverlap, CampaignState, FindingRecord
from racefuzz.judge.identity import ClusterState
from racefuzz.judge.outcome import Exit, Finding, RunResult
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Op, Schedule, Step


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


def shrunk(rec: FindingRecord, k: int, n: int) -> FindingRecord:
    rec.reproduction, rec.bundle = (k, n), Path(f"bundle-{rec.finding.overlap}")
    rec.status = ClusterState.SHRUNK
    return rec


def runs_race(extra: int) -> Schedule:
    """`register; create s1; create s2; [run s1 || run s2]` after `extra` more creates."""
    more = tuple(
        Step(0, Op.CREATE, session=f"s{3 + i}", profile="webgpu", model="tiny")
        for i in range(extra)
    )
    return Schedule(
        2,
        (
            Step(0, Op.REGISTER, library="webgpu"),
            Step(0, Op.CREATE, session="s1", profile="webgpu", model="tiny"),
            Step(0, Op.CREATE, session="s2", profile="webgpu", model="tiny"),
            *more,
            Step(0, Op.RUN, session="s1", group=1),
            Step(1, Op.RUN, session="s2", group=1),
        ),
    )


def test_a_duplicates_simpler_schedule_becomes_its_clusters_reproducer() -> None:
    # As on the H200: the 'run' cluster shrank to 8 steps (4/20), its bystander 'run+terminate'
    # to the same race in 5 (20/20).
    runs = shrunk(record("run", runs_race(3)), 4, 20)
    bystander = shrunk(record("run+terminate", runs_race(0), "overlap|run"), 20, 20)
    state = state_of(runs, bystander)
    state.mark_duplicate(bystander)
    assert bystander.verdict == "duplicate" and runs.verdict == "new"
    assert (runs.minimal, runs.reproduction, runs.bundle) == (
        runs_race(0),
        (20, 20),
        Path("bundle-run+terminate"),
    )
    assert (
        runs.state == "shrunk, reproduced 20/20 (the minimal schedule of 'overlap|run+terminate')"
    )


# (cluster, extra creates, k, n) for the cluster and two duplicates, offered in that order.
ONE_BUG = {
    # As simple (same steps, lower rate) or longer: the cluster's own schedule stays.
    "own stays": (
        (("run", 0, 12, 20), ("run+terminate", 0, 6, 20), ("copy+run", 1, 20, 20)),
        "run",
    ),
    # As 'copy+run' in campaign 9 on the H200: 4 steps failing 2 runs in 20 were kept over a
    # duplicate's 6 steps failing 15 in 18; a shorter one failing 1 run in 5 comes after that.
    "dependable first": (
        (("run", 0, 2, 20), ("copy+run", 2, 15, 18), ("run+terminate", 1, 4, 20)),
        "copy+run",
    ),
}


@pytest.mark.parametrize("offered, kept", ONE_BUG.values(), ids=ONE_BUG.keys())
def test_the_better_reproducer_of_one_bug_is_its_clusters(
    offered: tuple[tuple[str, int, int, int], ...], kept: str
) -> None:
    first, *others = [
        shrunk(record(shape, runs_race(extra), None if i == 0 else "overlap|run"), k, n)
        for i, (shape, extra, k, n) in enumerate(offered)
    ]
    state = state_of(first, *others)
    for dup in others:
        state.mark_duplicate(dup)
        assert dup.duplicate_of == "overlap|run"
    _, extra, k, n = next(o for o in offered if o[0] == kept)
    assert first.bundle == Path(f"bundle-{kept}") and first.reproduction == (k, n)
    assert first.minimal == runs_race(extra)


@pytest.mark.parametrize("reproduced", [True, False])
def test_a_cluster_still_shrinking_takes_its_duplicates_schedule_when_done(
    reproduced: bool,
) -> None:
    # Its own shrink ends with a longer schedule, or (as 'create' in campaign 9 on the H200,
    # seen twice) with none that reproduced, while a duplicate had shrunk to its race.
    runs = record("run", runs_race(3))
    runs.status, runs.minimal = ClusterState.SHRINKING, None
    bystander = shrunk(record("run+terminate", runs_race(0), "overlap|run"), 18, 20)
    bystander.cut_short = True  # its shrink's budget ran out: --shrink-only goes on with it
    state = state_of(runs, bystander)
    state.mark_duplicate(bystander)
    assert runs.bundle is None  # its own shrink may still find something simpler
    if reproduced:
        runs.minimal = runs_race(3)
        shrunk(runs, 5, 20)
    else:
        runs.bundle, runs.status = Path("bundle-run"), ClusterState.NOT_REPRODUCED
        runs.reproduction = (0, 20)
    state.mark_duplicate(runs)
    adopted = state.findings["overlap|run"]  # (mypy would hold `runs.minimal` None)
    assert (adopted.minimal, adopted.reproduction, adopted.bundle) == (
        runs_race(0),
        (18, 20),
        Path("bundle-run+terminate"),
    )
    assert adopted.state.startswith("shrunk, reproduced 18/20")
    assert adopted.cut_short  # the bundle's shrink was cut short, whoever holds it


def test_shrink_only_retries_what_did_not_reproduce_or_seldom_does_and_goes_on_from_a_cut() -> None:
    rec = record("copy", runs_race(0))
    rec.minimal, rec.bundle, rec.status = None, Path("bundle-copy"), ClusterState.NOT_REPRODUCED
    assert not campaign_store.needs_shrinking(rec)  # nothing to retry from: no failing run
    rec.smallest_result = RunResult(rec.smallest, (), Exit.CRASH, signal="SIGSEGV")
    assert not campaign_store.needs_shrinking(rec)
    assert campaign_store.needs_shrinking(rec, retry_unreproduced=True)
    rec.minimal, rec.smallest, rec.reproduction = runs_race(0), runs_race(2), (18, 20)
    assert not campaign_store.needs_shrinking(rec, retry_unreproduced=True)
    assert campaign_store.best_so_far(rec) == runs_race(2)
    rec.cut_short = True
    assert campaign_store.needs_shrinking(rec, retry_unreproduced=True)
    assert campaign_store.best_so_far(rec) == runs_race(0)  # it goes on from where it stopped
    rec.cut_short, rec.reproduction = False, (2, 20)  # 1 run in 10: a shrink may do better
    assert campaign_store.needs_shrinking(rec, retry_unreproduced=True)
    assert campaign_store.best_so_far(rec) == runs_race(2)
    assert not campaign_store.needs_shrinking(rec)  # a plain --resume leaves it
    assert campaign_store.best_so_far(rec) == runs_race(2)
    # A shrink whose budget ran out before it was 1-minimal goes on from its minimal schedule.
    rec.cut_short = True
    assert campaign_store.needs_shrinking(rec, retry_unreproduced=True)
    assert not campaign_store.needs_shrinking(rec)  # a resumed fuzzing run leaves it be
    assert campaign_store.best_so_far(rec) == runs_race(0)
    rec.duplicate_of = "overlap|create"
    assert not campaign_store.needs_shrinking(rec, retry_unreproduced=True)


def test_a_clusters_state_is_typed_and_its_line_is_rendered_from_it() -> None:
    rec = shrunk(record("copy", runs_race(0)), 9, 10)
    assert rec.state == "shrunk, reproduced 9/10"
    rec.cut_short = True
    rec.retry = "shrinking it again found no better reproducer (4 steps, 1/10)"
    rec.note("same minimal schedule as 'overlap|run'")
    rec.note("same minimal schedule as 'overlap|run'")  # said once
    assert rec.state == (
        "shrunk, reproduced 9/10, its budget ran out before it was 1-minimal; shrinking it "
        "again found no better reproducer (4 steps, 1/10), same minimal schedule as 'overlap|run'"
    )
    rec.status, rec.reproduction, rec.notes = ClusterState.NOT_REPRODUCED, (0, 0), []
    assert rec.state == "not reproduced (its budget ran out before any replay)"
    # What folders of earlier releases hold is their state line only: read back by its head.
    lines = {
        "shrunk, reproduced 18/20 (the minimal schedule of 'overlap|run')": ClusterState.SHRUNK,
        "not shrunk (time is up)": ClusterState.TIME_UP,
        "not shrunk": ClusterState.NOT_SHRUNK,
        "not reproduced (0/20)": ClusterState.NOT_REPRODUCED,
        "known issue (not shrunk)": ClusterState.KNOWN,
        "": ClusterState.NEW,
    }
    assert {line: ClusterState.read(line) for line in lines} == lines


def test_an_entry_without_its_status_restores_from_its_state_line(tmp_path: Path) -> None:
    finding = Finding("error", "run", "boom", ("testbed",))
    schedule = runs_race(0)
    (tmp_path / "findings").mkdir()
    original = tmp_path / "findings" / "a.json"
    original.write_text(dumps(schedule))
    entry = {**finding.to_json(), "original": "findings/a.json", "count": 2}
    entry.update(state="known issue (not shrunk)", duplicate_of="error|copy|boom")
    (tmp_path / "findings.json").write_text(json.dumps({"findings": [entry]}))
    (rec,) = campaign_store.restore(tmp_path)
    # No failing run kept and no bundle: it is "not shrunk" whatever the line said.
    assert rec.status is ClusterState.NOT_SHRUNK and rec.count == 2
    assert rec.state == "not shrunk, a duplicate of 'error|copy|boom'"
    entry.update(status="shrinking", notes=["the same defect as 'error|copy|boom'"])
    (tmp_path / "findings.json").write_text(json.dumps({"findings": [entry]}))
    (rec,) = campaign_store.restore(tmp_path)
    assert rec.state == "not shrunk, the same defect as 'error|copy|boom'"


def test_a_symptom_that_fails_alone_leaves_the_overlap_cluster_it_opened_to_the_race() -> None:
    # As on webgpu: a placement error that fails alone opened 'overlap|copy+run' first; the
    # race after that shape ("CommandEncoder is already finished") needs the cluster.
    alone, state = AloneUnderOverlap(), CampaignState()
    placement = Finding("error", "alloc", "DLPack export is not supported", ("webgpu",), 3)
    race_error = replace(placement, message="CommandEncoder is already finished", overlap="run")

    def opened(f: Finding) -> FindingRecord:
        rec = FindingRecord(f, 1, 0.0, Path("x.json"), Schedule(1, ()), None)
        state.findings[rec.cluster] = rec
        return rec

    after_overlap = replace(placement, overlap="copy+run")
    assert alone.route(after_overlap) == after_overlap  # nothing learnt yet: the overlap decides
    mixed = opened(replace(placement, overlap="create", origin="interleaving"))
    assert alone.learn(state, mixed) is None and alone.route(after_overlap) == after_overlap
    first = opened(replace(after_overlap, origin="alone"))
    assert alone.learn(state, first) is first  # moved to its symptom's cluster
    assert first.cluster == "error|alloc|DLPack export is not supported"
    assert set(state.findings) == {"overlap|create", first.cluster}  # 'overlap|copy+run' free
    assert alone.route(replace(placement, overlap="run")).cluster == first.cluster
    assert alone.route(race_error) == race_error  # another symptom keeps its overlap
    # A second cluster it opened before that baseline ended is counted into the first.
    second = opened(replace(placement, overlap="copy", origin="alone"))
    second.signatures = {"a", "b"}
    assert alone.learn(state, second) is first
    assert "overlap|copy" not in state.findings and first.count == 2 and first.signatures >= {"a"}


def test_a_pinned_crash_is_the_same_whichever_racing_thread_faulted() -> None:
    from racefuzz.judge.identity import ClusterKey, shows

    race = ClusterKey.parse("overlap|run")
    pinned = ClusterKey.parse("crash|SIGSEGV|run")
    # The Python thread of `run` faulted, or one of ORT's: then every step in flight is named.
    for found in ("crash|SIGSEGV|run", "crash|SIGSEGV|run+run_bound"):
        assert shows(race, pinned, ClusterKey.parse(found), "run"), found
    # Another signal, a crash in an op of none of them, an error: another failure.
    for found in ("crash|SIGABRT|run", "crash|SIGSEGV|register", "error|run|x"):
        assert not shows(race, pinned, ClusterKey.parse(found), "run"), found
    # An error's identity is its message, whichever thread: pinned exactly.
    error = ClusterKey.parse("error|run|WebGPU validation failed.")
    assert not shows(
        race, error, ClusterKey.parse("error|run_bound|WebGPU validation failed."), "run"
    )


def test_a_queued_baseline_never_waits_behind_a_shrink_that_holds_the_task_slots() -> None:
    from racefuzz.campaign.tasks import BASELINE, SHRINK, TaskQueue

    queue = TaskQueue(jobs=2)
    finding = Finding("crash", "run", "SIGSEGV", ("p",), step=2)
    queue.add(SHRINK, finding, "shrinking", lambda launcher: None)
    assert queue.may_take(fuzzing=True)  # no task runs: one of two slots may take it
    queue.take()
    queue.slots = 1  # that shrink now holds half the slots
    queue.add(SHRINK, finding, "another shrink", lambda launcher: None)
    assert not queue.may_take(fuzzing=True)  # fuzzing keeps the other slot
    queue.add(BASELINE, finding, "baseline", lambda launcher: None)
    assert queue.may_take(fuzzing=True)  # a run or two: taken at once
    assert queue.take()[0] == "baseline"
