"""The symptoms of one race: which failures of a replay count for an overlap cluster.

A race rarely fails the same way twice. onnxruntime-ep-webgpu's run-run race on lavapipe is a
SIGSEGV in half its runs and, in the others, "CommandEncoder is already finished", a
`std::bad_alloc` or a failed assertion (bench/results/real-eps.md). Counting only the symptom
a cluster was found with undercounts the race (9 of its 18 failures in 20 replays); counting
any failure after the overlap drifts onto failures that are no race at all (a placement error
that fails alone, the drift issue 24 was about).

So a replay counts when it shows the cluster's own symptom (`oracles.evidence` with the pin),
or another failure after an overlap of the cluster's kinds of call whose step, replayed alone
(`alone.alone_schedule`, twice, as the baseline rule does), shows no such symptom: the
overlap is what broke it. A step that fails alone never counts, however it overlapped. The
shrinker's runs and repro.py both count through this class, so they agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from racefuzz.judge import oracles
from racefuzz.judge.identity import ClusterKey, same_symptom
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.alone import alone_schedule
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Schedule

# The findings of one run of a schedule (the caller's runner, judged its way).
RunAlone = Callable[[Schedule], Sequence[Finding]]

ALONE_RUNS = 2  # a flaky alone failure still counts as alone, as in `judge.baseline`


class RaceSymptoms:
    """Counts replays for `cluster` pinned to `symptom` ("" pins nothing: then it is
    `oracles.evidence` alone). Not thread-safe: judge one replay at a time."""

    def __init__(self, cluster: str, symptom: str, run_alone: RunAlone) -> None:
        self.cluster, self.symptom = cluster, symptom
        self._run_alone = run_alone
        self._alone: dict[str, tuple[ClusterKey, ...]] = {}  # alone schedule -> its symptoms
        self.others: dict[str, bool] = {}  # another symptom seen -> whether it is the race's

    def evidence(self, schedule: Schedule, findings: Sequence[Finding]) -> Finding | None:
        """The first finding of a judged run of `schedule` that counts for the cluster."""
        hit = oracles.evidence(findings, self.cluster, self.symptom)
        if hit is not None or not self.symptom:
            return hit
        for f in findings:
            if oracles.evidence((f,), self.cluster) is not None and self._needs_overlap(
                schedule, f
            ):
                return f
        return None

    def is_other(self, hit: Finding) -> bool:
        """Whether `hit` (counted by `evidence`) is another symptom than the pinned one."""
        return bool(self.symptom) and not same_symptom(
            hit.symptom_key, ClusterKey.parse(self.symptom)
        )

    def _needs_overlap(self, schedule: Schedule, finding: Finding) -> bool:
        alone = alone_schedule(schedule, finding.step) if finding.step is not None else None
        if alone is None:
            return False  # no one step to replay alone (a crash of several in flight)
        key = dumps(alone)
        if key not in self._alone:
            seen: list[ClusterKey] = []
            for _ in range(ALONE_RUNS):
                seen.extend(f.symptom_key for f in self._run_alone(alone))
            self._alone[key] = tuple(seen)
        race = not any(same_symptom(s, finding.symptom_key) for s in self._alone[key])
        self.others[finding.symptom] = race
        return race
