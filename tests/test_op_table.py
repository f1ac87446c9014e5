"""Tests of racefuzz/schedule/op_table.py: every op is described once, and every stage works off it.

Two ways of proving it. In process, `run` is given a peer and modes for one test
(`monkeypatch` on `SPECS`), and well-formedness, JSON, generation, baselines and shrinking
follow. Out of process, `tests/data/new_op.diff` (a hypothetical `run_pair`: a session, then its
peer, plain or both through IOBinding) is applied to a copy of the package; the copy then
generates, checks, runs and replays alone the new op against ORT's CPU EP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, MutableMapping
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from racefuzz.schedule.alone import alone_schedule
from racefuzz.schedule.json_io import dumps, loads
from racefuzz.schedule.model import Op, Schedule, ScheduleError, Step, problems
from racefuzz.schedule.op_table import SPECS, OpSpec, Subject, check_table
from racefuzz.shrink.order import sort_key
from racefuzz.shrink.passes import drop_modes, normalised, without
from racefuzz.strategies.base import State, enabled_steps
from racefuzz.strategies.space import Space
from racefuzz.worker.ops import Runtime

ROOT = Path(__file__).resolve().parent.parent
NEW_OP = ROOT / "tests" / "data" / "new_op.diff"
SPACE = Space(profiles=("dml", "mgx"), models=("tiny", "mlp"))
REG = Step(0, Op.REGISTER)


def create(session: str, profile: str = "dml", thread: int = 0) -> Step:
    return Step(thread, Op.CREATE, session=session, profile=profile, model="mlp")


def run(session: str, peer: str | None, mode: str | None = None, **kw: int) -> Step:
    return Step(kw.get("thread", 0), Op.RUN, session=session, peer=peer, mode=mode)


# --- the table itself --------------------------------------------------------------------------


def test_every_op_has_one_entry_in_order_and_a_worker_handler() -> None:
    assert check_table(SPECS) == []
    assert list(SPECS) == list(Op)
    for op in Op:
        assert callable(getattr(Runtime, f"op_{op}", None)), f"no Runtime.op_{op}"


def test_a_bad_table_is_one_line_per_problem() -> None:
    bad = dict(SPECS)
    del bad[Op.FREE]
    bad[Op.RUN] = replace(SPECS[Op.RUN], weight=0.0, takes=("value",))
    bad[Op.COPY] = replace(SPECS[Op.COPY], mode_weights={"stream": 0.0, "nope": 1.0})
    bad[Op.READ] = replace(SPECS[Op.READ], mode_required=True)
    assert check_table(bad) == [
        "op 'free' has no entry",
        "'run' does not take its subject's field 'session'",
        "'run' has weight 0.0: it would never be generated",
        "'copy' weighs mode 'nope' it does not list",
        "'copy' mode 'stream' has weight 0.0",
        "'read' requires a mode but lists none",
    ]


# --- a peer and modes, given to `run` for one test --------------------------------------------


@pytest.fixture
def paired(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpSpec]:
    spec = replace(SPECS[Op.RUN], peer=Subject.SESSION, modes=("twice", "bound"))
    monkeypatch.setitem(cast(MutableMapping[Op, OpSpec], SPECS), Op.RUN, spec)
    yield spec


def test_peer_and_mode_are_checked_like_the_other_fields(paired: OpSpec) -> None:
    base = (REG, create("s1"), create("s2", "mgx"))
    assert problems(Schedule(1, (*base, run("s1", "s2", "twice")))) == []
    assert problems(Schedule(1, (*base, run("s1", None)))) == ["step 3: 'run' needs a 'peer'"]
    assert problems(Schedule(1, (*base, run("s1", "s9")))) == [
        "step 3: 'run' of session 's9' before its 'create'"
    ]
    assert problems(Schedule(1, (*base, Step(0, Op.RELEASE, session="s1", mode="x")))) == [
        "step 3: 'release' takes no 'mode'"
    ]
    text = dumps(Schedule(1, (*base, run("s1", "s2")))).replace('"peer"', '"mode": "x", "peer"')
    with pytest.raises(ScheduleError, match=r"^f: step 3: 'run' has no mode 'x' \(one of twice, "):
        loads(text, "f")


def test_a_peer_made_in_the_same_group_overlaps(paired: OpSpec) -> None:
    steps = (REG, create("s1"), replace(create("s2", thread=1), group=1))
    grouped = Schedule(2, (*steps, replace(run("s1", "s2"), group=1)))
    assert problems(grouped) == [
        "step 3: 'run' of session 's2' overlaps step 2 ('create') in group 1"
    ]


def test_mode_and_peer_survive_json_and_show_in_describe(paired: OpSpec) -> None:
    schedule = Schedule(1, (REG, create("s1"), create("s2"), run("s1", "s2", "bound")))
    assert '"mode": "bound", "peer": "s2"' in dumps(schedule)
    assert loads(dumps(schedule)) == schedule
    assert schedule.steps[-1].describe() == "run s1 -> s2 [bound]"
    assert "mode" not in json.loads(dumps(replace(schedule, steps=schedule.steps[:3])))["steps"][1]


def test_generation_proposes_each_live_peer_and_each_mode(paired: OpSpec) -> None:
    state = State(1)
    for s in (REG, create("s1"), create("s2", "mgx")):
        state.apply(s)
    runs = [s.describe() for s in enabled_steps(state, 0, SPACE) if s.op is Op.RUN]
    assert runs == [
        f"run {s} -> {p}{m}"
        for s in ("s1", "s2")
        for p in ("s1", "s2")
        for m in ("", " [twice]", " [bound]")
    ]


def test_the_baseline_makes_the_peer_on_its_own_profile(paired: OpSpec) -> None:
    schedule = Schedule(2, (REG, create("a", "mgx"), create("b", "dml", 1), run("b", "a", "twice")))
    alone = alone_schedule(schedule, 3)
    assert alone is not None
    assert [s.describe() for s in alone.steps] == [
        "register",
        "create s1 (dml, mlp)",
        "create s2 (mgx, mlp)",
        "run s1 -> s2 [twice]",
    ]


def test_shrinking_renames_peers_drops_them_with_their_create_and_drops_modes(
    paired: OpSpec,
) -> None:
    schedule = Schedule(1, (REG, create("x"), create("y"), run("x", "y", "twice")))
    assert [s.describe() for s in normalised(schedule).steps][-1] == "run s1 -> s2 [twice]"
    smaller = without(schedule, [2])
    assert smaller is not None and [s.op for s in smaller.steps] == [Op.REGISTER, Op.CREATE]

    class Shrinker:
        current = schedule

        def consider(self, candidate: Schedule | None) -> bool:
            if candidate is None or sort_key(candidate) >= sort_key(self.current):
                return False
            self.current = candidate
            return True

    shrinker = Shrinker()
    drop_modes(shrinker)  # type: ignore[arg-type]  # only `current` and `consider` are used
    assert shrinker.current.steps[-1] == run("x", "y")


# --- a whole new op, as a diff ----------------------------------------------------------------


@pytest.mark.slow
def test_a_new_op_is_one_table_entry_one_handler_and_the_op_list_in_the_docs(
    tmp_path: Path,
) -> None:
    diff = NEW_OP.read_text(encoding="utf-8")
    touched = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", diff, re.M)))
    assert touched == ["docs/ops.md", "racefuzz/schedule/op_table.py", "racefuzz/worker/ops.py"]
    shutil.copytree(
        ROOT / "racefuzz", tmp_path / "racefuzz", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    subprocess.run(["git", "apply", str(NEW_OP)], cwd=tmp_path, check=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _FUZZ_THE_NEW_OP, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The new op alone: both sessions made on their own models, then the call with its mode.
    assert re.fullmatch(
        r"alone: register; create s1 \(cpu(?:-1t)?, \w+\); create s2 \(cpu(?:-1t)?, \w+\); "
        r"run_pair s1 -> s2 \[bound\]",
        proc.stdout.splitlines()[-1],
    ), proc.stdout[-1000:]


_FUZZ_THE_NEW_OP = textwrap.dedent(
    """
    import sys
    import racefuzz
    from racefuzz import strategies
    from racefuzz.execute import executor
    from racefuzz.schedule.alone import alone_schedule
    from racefuzz.schedule.model import Op
    from racefuzz.schedule.json_io import dumps, loads
    from racefuzz.strategies.space import space_for
    from racefuzz.targets.registry import load_target

    assert racefuzz.__file__.startswith(sys.argv[1]), racefuzz.__file__
    pair = Op("run_pair")
    target = load_target("cpu")
    space = space_for(target, 24, 4)
    found = []
    for name in ("random", "pct", "swarm", "mutate"):
        strategy = strategies.make(name, space, 0)
        for _ in range(150):
            s = strategy.next_schedule()
            assert not space.problems(s) and loads(dumps(s)) == s
            found += [(s, i) for i, step in enumerate(s.steps) if step.op is pair]
    assert {s.steps[i].mode for s, i in found} == {None, "bound"}
    schedule, i = min(
        ((s, i) for s, i in found if s.steps[i].mode == "bound"), key=lambda f: len(f[0].steps)
    )
    alone = alone_schedule(schedule, i)
    fuzzed, ran = executor.run(target, schedule), executor.run(target, alone)
    assert not fuzzed.findings and not ran.findings, (fuzzed.findings, ran.findings)
    last = ran.outcome(len(alone.steps) - 1)
    assert last is not None and last.ok and last.check == "ok", last
    print("alone: " + "; ".join(s.describe() for s in alone.steps))
    """
)
