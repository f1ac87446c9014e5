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

from racefuzz.outcome import Finding, RunResult
from racefuzz.schedule import Op, Schedule, Step
from racefuzz.schedule_json import dumps
from racefuzz.target import Target

INTERLEAVING = "interleaving"
ALONE = "alone"

Runner = Callable[[Schedule], RunResult]


def alone_schedule(schedule: Schedule, step: int) -> Schedule | None:
    """The smallest single-thread schedule that makes the same call as `step` does."""
    if step >= len(schedule.steps):
        return None  # the worker's teardown: it has no single call to replay alone
    s = schedule.steps[step]
    profile = schedule.step_profile(step)
    models = sorted(schedule.models())
    model = None
    if s.session is not None:
        for prev in schedule.steps[: step + 1]:
            if prev.op is Op.CREATE and prev.session == s.session:
                model = prev.model
    model = model or (models[0] if models else None)
    steps = [Step(0, Op.REGISTER)]
    if s.op is Op.UNREGISTER:
        steps.append(Step(0, Op.UNREGISTER))
    elif s.op is not Op.REGISTER:
        if profile is None or model is None:
            return None
        create = Step(0, Op.CREATE, session="s1", profile=profile, model=model)
        steps.append(create)
        if s.op in (Op.RUN, Op.RUN_BOUND, Op.RELEASE):
            steps.append(Step(0, s.op, session="s1"))
        elif s.op is Op.COPY:
            steps.append(Step(0, Op.COPY, profile=profile))
        elif s.op in (Op.ALLOC, Op.READ, Op.FREE):
            steps.append(Step(0, Op.ALLOC, value="v1", profile=profile))
            if s.op is not Op.ALLOC:
                steps.append(Step(0, s.op, value="v1"))
    return Schedule(threads=1, steps=tuple(steps), name="baseline")


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
