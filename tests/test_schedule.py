"""Tests of racefuzz/schedule/model.py: JSON round trip, strict decoding, well-formedness rules."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racefuzz.schedule.json_io import (
    dumps,
    from_json_obj,
    load,
    load_many,
    loads,
    save,
    to_json_obj,
)
from racefuzz.schedule.model import MAX_JITTER_US, Op, Schedule, ScheduleError, Step, problems
from racefuzz.strategies.hypothesis_schedules import schedules, spaces
from racefuzz.strategies.space import Space

EXAMPLE = Space(profiles=("dml", "mgx"), models=("mlp",))
REG = Step(0, Op.REGISTER)


def create(thread: int, session: str, profile: str = "dml") -> Step:
    return Step(thread, Op.CREATE, session=session, profile=profile, model="mlp")


def sched(*steps: Step, threads: int = 2) -> Schedule:
    return Schedule(threads=threads, steps=steps)


# --- round trip -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces().flatmap(schedules))
def test_every_well_formed_schedule_survives_the_json_round_trip(schedule: Schedule) -> None:
    assert loads(dumps(schedule)) == schedule
    assert from_json_obj(json.loads(json.dumps(to_json_obj(schedule)))) == schedule


@given(schedules(EXAMPLE), st.text(min_size=1, max_size=20), st.text(max_size=40))
@settings(max_examples=50, deadline=None)
def test_names_and_descriptions_survive_the_round_trip_too(
    schedule: Schedule, name: str, description: str
) -> None:
    named = replace(schedule, name=name, description=description)
    back = loads(dumps(named))
    assert (back, back.name, back.description) == (named, name, description)


def test_dumps_writes_one_step_a_line_and_leaves_defaults_out() -> None:
    schedule = sched(REG, replace(create(1, "s1"), group=3, jitter_us=7), threads=2)
    assert dumps(schedule) == (
        '{"version": 1, "threads": 2, "steps": [\n'
        '  {"thread": 0, "op": "register"},\n'
        '  {"thread": 1, "op": "create", "session": "s1", "profile": "dml", "model": "mlp", '
        '"group": 3, "jitter_us": 7}\n'
        "]}\n"
    )
    assert loads(dumps(sched(threads=1))) == sched(threads=1)


def test_save_with_exclusive_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    save(sched(REG), path, exclusive=True)
    with pytest.raises(FileExistsError):
        save(sched(REG), path, exclusive=True)
    assert load(path) == sched(REG)


# --- strict decoding: one line naming the source ----------------------------------------------

STEPS_OK = '"threads": 1, "steps": [{"thread": 0, "op": "register"}'
MALFORMED = [
    ("", r"f.json: not valid JSON (Expecting value at line 1)"),
    ("[]", r"f.json: expected a JSON object"),
    ('{"version": 2}', r"f.json: unsupported schedule version 2 (this racefuzz reads 1)"),
    (
        '{"threads": 1, "steps": []}',
        r"f.json: unsupported schedule version None (this racefuzz reads 1)",
    ),
    ('{"version": 1, "threads": 1, "steps": [], "x": 1}', r"f.json: unknown field 'x'"),
    ('{"version": 1, "threads": true, "steps": []}', r"f.json: 'threads' must be an integer"),
    ('{"version": 1, "threads": 1, "steps": {}}', r"f.json: 'steps' must be a list"),
    (
        '{"version": 1, "threads": 1, "name": 3, "steps": []}',
        r"f.json: 'name' and 'description' must be strings",
    ),
    ('{"version": 1, "threads": 1, "steps": [3]}', r"f.json: step 0: expected an object"),
    (
        '{"version": 1, "threads": 1, "steps": [{"thread": 0, "op": "jump"}]}',
        "f.json: step 0: unknown op 'jump' (one of register, unregister, create, run, run_bound, "
        "copy, alloc, read, free, release, feed, run_async, terminate, share, hold, resume, "
        "keep, bind, upload, hard_release)",
    ),
    (
        '{"version": 1, ' + STEPS_OK[:-1] + ', "color": 1}]}',
        r"f.json: step 0: unknown field 'color'",
    ),
    (
        '{"version": 1, "threads": 1, "steps": [{"thread": "0", "op": "register"}]}',
        r"f.json: step 0: 'thread' must be an integer",
    ),
    (
        '{"version": 1, ' + STEPS_OK[:-1] + ', "group": 1.5}]}',
        r"f.json: step 0: 'group' must be an integer",
    ),
    (
        '{"version": 1, ' + STEPS_OK[:-1] + ', "jitter_us": null}]}',
        r"f.json: step 0: 'jitter_us' must be an integer",
    ),
    (
        '{"version": 1, ' + STEPS_OK[:-1] + ', "library": ""}]}',
        r"f.json: step 0: 'library' must be a non-empty string",
    ),
    (
        '{"version": 1, ' + STEPS_OK + ', {"thread": 0, "op": "run", "session": "s1"}]}',
        r"f.json: step 1: 'run' of session 's1' before its 'create'",
    ),
    (
        '{"version": 1, ' + STEPS_OK + ', {"thread": 0, "op": "run"}]}',
        r"f.json: step 1: 'run' needs a 'session'",
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_input_is_one_schedule_error_line(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
        loads(text, "f.json")


def test_an_unreadable_file_or_an_empty_folder_is_a_schedule_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    unreadable = f"cannot read schedule '{missing}': No such file or directory"
    with pytest.raises(ScheduleError, match=f"^{re.escape(unreadable)}$"):
        load(missing)
    empty = f"no schedule files (*.json) in '{tmp_path}'"
    with pytest.raises(ScheduleError, match=f"^{re.escape(empty)}$"):
        load_many(tmp_path)


def test_load_many_reads_every_json_file_of_a_folder_in_name_order(tmp_path: Path) -> None:
    for name in ("b", "a"):
        save(sched(REG, threads=1), tmp_path / f"{name}.json")
    assert [p.name for p, _ in load_many(tmp_path)] == ["a.json", "b.json"]


# --- well-formedness --------------------------------------------------------------------------

RULES = [
    (Schedule(0, ()), "threads must be at least 1, not 0"),
    (sched(REG, Step(2, Op.UNREGISTER)), "step 1: thread 2 is outside 0..1"),
    (
        sched(replace(REG, jitter_us=MAX_JITTER_US + 1)),
        f"step 0: jitter_us must be within 0..{MAX_JITTER_US}",
    ),
    (sched(Step(0, Op.REGISTER, session="s1")), "step 0: 'register' takes no 'session'"),
    (
        sched(REG, Step(0, Op.CREATE, session="s1", profile="dml")),
        "step 1: 'create' needs a 'model'",
    ),
    (sched(REG, REG), "step 1: 'register' of * while it is registered"),
    (
        sched(Step(0, Op.UNREGISTER, library="a")),
        "step 0: 'unregister' of a while it is not registered",
    ),
    (sched(create(0, "s1")), "step 0: 'create' while the EP library of 'dml' is not registered"),
    (
        sched(REG, Step(0, Op.COPY, profile="dml")),
        "step 1: 'copy' before any 'create' (no backend chosen yet)",
    ),
    (
        sched(REG, create(0, "s1"), create(1, "s1")),
        "step 2: 'create' of session 's1' that is alive",
    ),
    (
        sched(
            REG, create(0, "s1"), Step(0, Op.RELEASE, session="s1"), Step(1, Op.RUN, session="s1")
        ),
        "step 3: 'run' of session 's1' before its 'create'",
    ),
    (
        sched(
            REG,
            create(0, "s1"),
            Step(0, Op.ALLOC, value="v", profile="dml"),
            Step(1, Op.ALLOC, value="v", profile="mgx"),
        ),
        "step 3: 'alloc' of value 'v' that is alive",
    ),
    (sched(REG, Step(0, Op.FREE, value="v")), "step 1: 'free' of value 'v' before its 'alloc'"),
    (
        sched(
            REG, replace(create(0, "a"), group=1), create(0, "b"), replace(create(1, "c"), group=1)
        ),
        "step 3: group 1 is not one consecutive run of steps",
    ),
    (
        sched(REG, replace(create(0, "a"), group=1), replace(create(0, "b"), group=1)),
        "step 1: group 1 has two steps on one thread",
    ),
]


@pytest.mark.parametrize(("schedule", "message"), RULES)
def test_each_well_formedness_rule_names_its_step(schedule: Schedule, message: str) -> None:
    assert problems(schedule) == [message]


def test_a_read_needs_the_library_of_its_values_profile_but_a_free_does_not() -> None:
    lib = {"dml": "a", "mgx": "b"}.get
    alloc = Step(0, Op.ALLOC, value="v", profile="dml")
    steps = [Step(0, Op.REGISTER, library="a"), create(0, "s1"), alloc]
    unreg = Step(0, Op.UNREGISTER, library="a")
    read, free = Step(1, Op.READ, value="v"), Step(1, Op.FREE, value="v")
    assert problems(sched(*steps, unreg, read), lib) == [
        "step 4: 'read' while the EP library of 'dml' is not registered"
    ]
    assert problems(sched(*steps, unreg, free), lib) == []


def test_a_profile_of_orts_own_ep_needs_no_registration_but_others_need_theirs() -> None:
    lib = {"cpu": None, "dml": "a"}.get
    assert problems(sched(create(0, "s1", "cpu")), lib) == []
    assert problems(sched(Step(0, Op.REGISTER, library="b"), create(0, "s1")), lib) == [
        "step 1: 'create' while the EP library of 'dml' is not registered"
    ]


def test_a_session_may_be_created_again_under_its_name_after_release() -> None:
    release = Step(0, Op.RELEASE, session="s1")
    assert problems(sched(REG, create(0, "s1"), release, create(1, "s1", "mgx"))) == []


def test_the_named_scenario_corpus_is_well_formed_for_the_example_target() -> None:
    folder = Path(__file__).parent.parent / "schedules"
    if not folder.is_dir():
        pytest.skip("no schedules/ folder")
    for path, schedule in load_many(folder):
        assert EXAMPLE.problems(schedule) == [], path
