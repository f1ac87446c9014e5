"""A step's `dims`: the sizes of a dynamic model's symbolic dims for one run, so schedules vary
shapes run to run (size-dependent kernel paths, shape caches) and the shrinker sizes them down
like anything else."""

from __future__ import annotations

from dataclasses import replace

import onnxruntime as ort
import pytest
from test_shrink import MODELS, Fake, b3_shared_slot, create, do_shrink, minimal, reg, run

from racefuzz.errors import RacefuzzError
from racefuzz.schedule import json_io
from racefuzz.schedule.model import Op, Schedule, Step, problems
from racefuzz.targets.models import has_symbolic_dims, model_path
from racefuzz.worker.base import random_feeds


def test_dims_size_the_symbolic_dims_in_the_order_the_inputs_name_them() -> None:
    session = ort.InferenceSession(str(model_path("dynamic")), providers=["CPUExecutionProvider"])
    (x,) = session.get_inputs()
    fixed = x.shape[-1]
    assert random_feeds(session, 0, (3, 17))[x.name].shape == (3, 17, fixed)
    assert random_feeds(session, 0, (5,))[x.name].shape == (5, 1, fixed)  # the rest is 1
    assert random_feeds(session, 0)[x.name].shape == (1, 1, fixed)
    (y,) = session.run(None, random_feeds(session, 0, (2, 33)))
    assert y.shape[0] == 2
    assert has_symbolic_dims("dynamic") and not has_symbolic_dims("mlp")


def test_dims_round_trip_and_bad_dims_are_one_line() -> None:
    steps = (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="cpu", model="dynamic"),
        Step(0, Op.RUN, session="s1", dims=(3, 17)),
    )
    schedule = Schedule(1, steps, "dims")
    assert json_io.loads(json_io.dumps(schedule)) == schedule
    assert steps[2].describe() == "run s1 {3x17}"
    text = json_io.dumps(schedule)
    with pytest.raises(RacefuzzError, match=r"step 2: 'dims' must be a list of integers$"):
        json_io.loads(text.replace("[3, 17]", '"3x17"'))
    with pytest.raises(RacefuzzError, match=r"dims: at most 4, each within 1\.\.4096$"):
        json_io.loads(text.replace("[3, 17]", "[0, 17]"))
    on_create = replace(steps[1], dims=(2,))
    found = problems(Schedule(1, (steps[0], on_create), "x"))
    assert found == ["step 1: 'create' takes no 'dims' (it feeds no inputs)"], found


def _big_batch(schedule: Schedule) -> bool:
    """A bug model: a run of a session with a batch of 16 or more fails."""
    return b3_shared_slot(schedule) and any(s.dims and s.dims[0] >= 16 for s in schedule.steps)


def test_the_shrinker_sizes_dims_down_to_what_the_failure_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(MODELS, "B3", _big_batch)
    sized = replace(run(0, "s1"), dims=(257, 64))
    original = minimal(
        reg(),
        create(0, "s1", "dml"),
        replace(run(0, "s1"), dims=(7, 3)),
        create(0, "s2", "mgx"),
        sized,
    )
    result = do_shrink(original, "B3", Fake("B3"))
    dims = [s.dims for s in result.final.steps if s.dims]
    assert dims == [(16, 1)], result.final  # halved while it still fails, the rest gone
