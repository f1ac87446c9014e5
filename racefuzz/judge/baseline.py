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
from racefuzz.schedule.alone import alone_schedule
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Schedule
from racefuzz.targets.model import Target

INTERLEAVING = "interleaving"
ALONE = "alone"

Runner = Callable[[Schedule], RunResult]


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
