"""The worker's step results on the wire, and run.json files of the previous release."""

from __future__ import annotations

import json

import pytest

from racefuzz.judge.outcome import Check, Exit, RunResult, StepOutcome
from racefuzz.report import run_json
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.worker.protocol import Skip, StepResult


@pytest.mark.parametrize(
    "result",
    [
        StepResult(),
        StepResult.checked("mismatch", "output 0: max |diff| 3 at [0, 1]"),
        StepResult.skip(Skip.NO_COMPILER, "no C compiler for envapi.c"),
        StepResult.error("KeyError: 's1'", internal="Traceback ..."),
    ],
)
def test_a_step_result_reads_back_from_its_done_event(result: StepResult) -> None:
    event = json.loads(json.dumps({"ev": "done", "step": 3, **result.to_json(), "ms": 1.5}))
    assert StepResult.from_json(event) == result


def test_a_skip_is_its_own_field_and_the_detail_holds_only_the_reason() -> None:
    d = StepResult.skip(Skip.MISSING, "session s1 was not created").to_json()
    assert d["skipped"] == "missing" and d["detail"] == "session s1 was not created"
    assert d["ok"] is True and d["check"] is None


@pytest.mark.parametrize(
    ("reason", "skipped"),
    [
        ("session s1 was not created", "missing"),
        ("peer v2 was not made", "missing"),
        ("the EP computes in host memory", "unsupported"),
        ("the EP has no streams", "unsupported"),
        ("no C compiler for envapi.c", "no-compiler"),
        ("s5 is another EP configuration", "unfit"),
    ],
)
def test_an_old_outcome_s_skip_is_read_from_its_detail(reason: str, skipped: str) -> None:
    old = {"step": 4, "ok": True, "check": None, "detail": f"skipped: {reason}", "ms": 0.1}
    expected = StepOutcome(4, True, detail=reason, ms=0.1, skipped=skipped)
    assert StepOutcome.from_json(old) == expected
    ran = {**old, "check": "zeroed", "detail": "output 0: all zeros"}
    assert StepOutcome.from_json(ran).skipped == ""


def test_a_new_outcome_is_taken_as_written() -> None:
    # Written by this release: a detail that happens to begin with the old words stays as is.
    new = {"step": 1, "ok": True, "check": "ok", "detail": "skipped: x", "skipped": "", "ms": 0}
    assert StepOutcome.from_json(new) == StepOutcome(1, True, check=Check.OK, detail="skipped: x")


def test_a_run_json_of_the_previous_release_still_loads() -> None:
    create = Step(0, Op.CREATE, session="s1", profile="cpu", model="tiny")
    schedule = Schedule(1, (Step(0, Op.REGISTER), create, Step(0, Op.RUN, session="s1")), "old")
    outcomes = (StepOutcome(0, True), StepOutcome(1, False, "no EP"), StepOutcome(2, True))
    run = RunResult(schedule, outcomes, Exit.CLEAN)
    old = run_json.run_to_json(run)
    for o in old["outcomes"]:  # as the previous release wrote them
        del o["skipped"]
    old["outcomes"][2]["detail"] = "skipped: session s1 was not created"
    loaded = run_json.run_from_json(json.loads(json.dumps(old)))
    assert loaded.outcomes[2] == StepOutcome(
        2, True, detail="session s1 was not created", skipped=Skip.MISSING.value
    )
    assert run_json.run_from_json(run_json.run_to_json(loaded)) == loaded
