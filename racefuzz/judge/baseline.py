"""The baseline rule: does a finding need the interleaving, or does its op fail alone too?

For a finding at step i, the baseline is the same op on the same profile and model, with its
session alone, in a fresh process, on the main thread (thread 0 is the main thread). If that
fails with the same signature the finding "fails alone too" (still a bug, reported in its own
section, like the seed's 10D build where every env-level copy failed); otherwise the order of
calls broke it: "interleaving", racefuzz's main catch.

Baselines are cached per target and alone-schedule, in memory and optionally in a JSON file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.schedule.op_table import PREFIX, SPECS, Subject, maker
from racefuzz.targets.model import Target

INTERLEAVING = "interleaving"
ALONE = "alone"

Runner = Callable[[Schedule], RunResult]


def alone_schedule(schedule: Schedule, step: int) -> Schedule | None:
    """The smallest single-thread schedule that makes the same call as `step` does.

    The op table's recipe: `register`; then, unless the step is about a library, `create s1`
    on the step's profile and model (its own session, or the backend env-level memory needs);
    the makers of the value it uses (`alloc v1`) and of its peer (`create s2`, `alloc v2`, on
    the peer's profile); then the step itself on those names, mode kept.
    """
    if step >= len(schedule.steps):
        return None  # the worker's teardown: it has no single call to replay alone
    s = schedule.steps[step]
    spec = SPECS[s.op]
    steps = [Step(0, Op.REGISTER)]
    if spec.subject is Subject.LIBRARY:
        if s.op is not Op.REGISTER:
            steps.append(Step(0, s.op, mode=s.mode))  # every library: alone, which is moot
        return Schedule(threads=1, steps=tuple(steps), name="baseline")
    profile, model = schedule.step_profile(step), _model(schedule, step, s.session)
    if profile is None or model is None:
        return None
    names: dict[str, str | None] = {"profile": profile, "model": model, "mode": s.mode}
    count = {Subject.SESSION: 1, Subject.VALUE: 0}  # s1 is the session every recipe creates
    if spec.subject is Subject.SESSION:
        names["session"] = "s1"
    if not spec.makes(Subject.SESSION):
        steps.append(make_step(Op.CREATE, 0, session="s1", profile=profile, model=model))
    if spec.subject is Subject.VALUE:
        count[Subject.VALUE] = 1
        names["value"] = "v1"
        if not spec.makes(Subject.VALUE):
            steps.append(make_step(maker(Subject.VALUE).op, 0, value="v1", profile=profile))
    if spec.peer is not None:
        count[spec.peer] += 1
        peer = names["peer"] = f"{PREFIX[spec.peer]}{count[spec.peer]}"
        on = schedule.made_with(spec.peer, s.peer or "", step)
        if on is None:
            return None
        made = {spec.peer.value: peer, "profile": on, "model": _model(schedule, step, s.peer)}
        steps.append(make_step(maker(spec.peer).op, 0, **made))
    steps.append(make_step(s.op, 0, **names))
    return Schedule(threads=1, steps=tuple(steps), name="baseline")


def _model(schedule: Schedule, step: int, session: str | None) -> str | None:
    """The model `session` was last created with up to `step`, else the smallest model."""
    model = None
    if session is not None:
        for prev in schedule.steps[: step + 1]:
            if SPECS[prev.op].makes(Subject.SESSION) and prev.session == session:
                model = prev.model
    models = sorted(schedule.models())
    return model or (models[0] if models else None)


class Baselines:
    def __init__(self, target: Target, run: Runner, path: Path | None = None) -> None:
        self._run = run
        self._path = path
        self._key = hashlib.sha256(json.dumps(target.to_json(), sort_keys=True).encode())
        self._cache: dict[str, list[str]] = {}
        if path is not None and path.exists():
            try:
                self._cache = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                self._cache = {}

    def signatures_alone(self, alone: Schedule, run: Runner | None = None) -> list[str]:
        key = self._key.copy()
        key.update(dumps(alone).encode())
        k = key.hexdigest()[:24]
        if k not in self._cache:
            found: set[str] = set()
            for _ in range(2):  # a flaky alone failure still counts as alone
                found.update(f.signature for f in (run or self._run)(alone).findings)
            self._cache[k] = sorted(found)
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._path.write_text(json.dumps(self._cache, indent=1), encoding="utf-8")
        return self._cache[k]

    def classify(self, schedule: Schedule, finding: Finding, run: Runner | None = None) -> Finding:
        """`finding` with its origin; `run` (default: the one given at construction) runs the
        baseline, e.g. through a campaign's job slot, so that it ends with the slot."""
        if finding.step is None:
            return finding
        alone = alone_schedule(schedule, finding.step)
        if alone is None:
            return finding
        seen = self.signatures_alone(alone, run)
        origin = ALONE if finding.signature in seen else INTERLEAVING
        return replace(finding, origin=origin)

    def classify_all(self, result: RunResult) -> RunResult:
        return replace(
            result, findings=tuple(self.classify(result.schedule, f) for f in result.findings)
        )
