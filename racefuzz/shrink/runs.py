"""How the shrinker runs a schedule: the signature a run must show, replays (in batches run at
once when asked), and the time budget.

A race between sessions of a GPU EP may show only while the GPU is busy (webgpu's concurrent
create-and-run on an H200: 0/5 replays alone, 16/20 eight at a time), so a shrink of such a
target runs its replays `parallel` at a time: they load the GPU as the campaign's other jobs
did, and a candidate costs one run's wall time instead of several.

A rare failure needs more runs per candidate than a frequent one: a check of 1 in 3 replays
misses a candidate failing 1 run in 8 two times in three, so the shrink keeps nothing and ends
where it began (webgpu's "Device is lost", 5-10% of runs). The shrinker therefore measures how
often the original fails (`Runs.measure`) and sizes its checks to that rate (`replays_for`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from math import comb

from racefuzz.judge import oracles
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.judge.race_symptoms import RaceSymptoms
from racefuzz.schedule.model import Schedule


class Stop(Exception):
    """The time budget is spent: no more candidates, only the final replays."""


def shows(wanted: str, finding: Finding, symptom: str | None = None) -> bool:
    """Whether `finding` is what a shrink of `wanted` (a signature or a cluster key) looks for,
    by the one rule of `identity.shows`; `symptom` (a cluster key) pins the failure the shrink
    started from, so that a candidate failing with another cluster's symptom is never counted.

    Under overlap clustering a candidate may fail with fewer kinds of call overlapping: the
    alloc in `[create || alloc || run]` was a bystander of the create-run race. That is the same
    race with fewer parties, so it counts, and the cluster then shrinks to the schedule the
    create+run cluster shrinks to: `CampaignState.mark_duplicate` makes them one bug instead of
    one cluster per set of bystanders. A failure with no overlap never counts."""
    return oracles.evidence((finding,), wanted, symptom or "") is not None


def shown_cluster(signature: str, symptom: str, failed: Sequence[Finding]) -> str | None:
    """The cluster a shrunk schedule's last failing replay belongs to (`failed`: its findings),
    for `CampaignState.mark_duplicate`: the finding with the pinned `symptom` first; else, since
    a race's other symptoms count too (`RaceSymptoms`), any finding after an overlap that is
    evidence of `signature`. So a cluster that shrank to another's race is that cluster's
    duplicate whichever symptom its last replay happened to show."""
    pinned = (f.cluster for f in failed if shows(signature, f, symptom or None))
    loose = (f.cluster for f in failed if f.overlap and shows(signature, f))
    return next(pinned, None) or next(loose, None)


# A check sized by `replays_for` misses a candidate that fails as often as the original did at
# most this often, as the default 1 in 3 does a bug that shows in half the runs.
MISS = 1 / 8


def replays_for(need: int, replays: int, rate: float, cap: int) -> int:
    """Replays for a check of `need` failing runs, so that a candidate failing at `rate` (the
    original's, measured) passes it with probability 1 - MISS: never fewer than `replays`, never
    more than `cap` (a check of a candidate that does not fail costs that many runs)."""
    n = replays
    while n < cap and _at_least(need, n, rate) < 1 - MISS:
        n += 1
    return n


def _at_least(k: int, n: int, p: float) -> float:
    """P(at least k of n independent runs fail), each failing with probability p."""
    return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


class Runs:
    """Runs for one shrink, all through `run` (which must be thread-safe when `parallel` > 1)."""

    def __init__(
        self,
        run: Callable[[Schedule], RunResult],
        signature: str,
        deadline: float,
        confirm_replays: int,
        parallel: int = 1,
        symptom: str | None = None,
        between: Callable[[], float] | None = None,
    ) -> None:
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {parallel}")
        self._run, self.deadline = run, deadline
        self.symptom = symptom  # the failure the shrink started from (`shows`)
        # Its race's other symptoms count too where the step that failed runs clean alone.
        self.race = RaceSymptoms(signature, symptom or "", lambda s: run(s).findings)
        self.confirm_replays, self.parallel = confirm_replays, parallel
        self._pool = ThreadPoolExecutor(parallel) if parallel > 1 else None
        self.calls = self.batches = 0
        self.batch_seconds = 0.0  # wall time of the batches
        self.hit: RunResult | None = None  # the last failing run of the schedule under test
        # Called before each batch: a campaign fuzzes in the slot for a while (`Campaign`). The
        # seconds it took are not the shrink's: the deadline moves by as much.
        self._between = between
        self.yielded = 0.0

    @property
    def signature(self) -> str:
        return self.race.cluster

    @signature.setter
    def signature(self, cluster: str) -> None:  # an earlier overlap's race took the blame
        self.race.cluster = cluster

    def lend(self, between: Callable[[], float] | None) -> None:
        self._between = between

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C must not wait for runs

    def fails(
        self,
        candidate: Schedule,
        need: int,
        replays: int,
        keep_reserve: bool = True,
        match: Callable[[Finding], bool] | None = None,
    ) -> bool:
        """True once `need` of up to `replays` runs showed the signature (or a finding `match`
        accepts); stops as soon as the answer is known either way (a batch in flight is
        finished)."""
        hits = done = 0
        while hits < need and hits + replays - done >= need:
            n = min(self.parallel, replays - done)
            hits += self._showing(candidate, n, keep_reserve, match)
            done += n
        return hits >= need

    def measure(self, schedule: Schedule, tries: int, enough: int) -> tuple[int, int]:
        """(showed, run) of `tries` runs of `schedule`, or of the first `enough` when every one
        of them showed the signature: a failure that frequent suits the default checks, and a
        rarer one needs all `tries` for its rate (a batch in flight is finished)."""
        hits = done = 0
        while done < tries and not (done >= enough and hits == done):
            n = min(self.parallel, tries - done)
            hits += self._showing(schedule, n, keep_reserve=False)
            done += n
        return hits, done

    def _showing(
        self,
        schedule: Schedule,
        n: int,
        keep_reserve: bool,
        match: Callable[[Finding], bool] | None = None,
    ) -> int:
        """How many of `n` runs at once showed the signature (the last of them becomes `hit`)."""
        shown = [r for r in self.batch(schedule, n, keep_reserve) if self.shows(r, match)]
        if shown:
            self.hit = shown[-1]
        return len(shown)

    def shows(self, result: RunResult, match: Callable[[Finding], bool] | None = None) -> bool:
        if match is not None:
            return any(match(f) for f in result.findings)
        return self.race.evidence(result.schedule, result.findings) is not None

    def batch(self, schedule: Schedule, n: int, keep_reserve: bool) -> list[RunResult]:
        """`n` runs at once; `Stop` instead once the deadline has passed (so a shrink ends at
        most one batch late) or, with `keep_reserve`, once the time left, at the mean batch time
        so far, no longer holds this batch and the confirmation replays."""
        if self._between is not None:
            spent = self._between()
            self.yielded += spent
            self.deadline += spent
        now = time.monotonic()
        if now >= self.deadline:
            raise Stop
        if keep_reserve and self.batches:
            mean = self.batch_seconds / self.batches
            if now + mean * (1 + math.ceil(self.confirm_replays / self.parallel)) > self.deadline:
                raise Stop
        t0 = time.monotonic()
        if self._pool is None or n == 1:
            results = [self._run(schedule) for _ in range(n)]
        else:
            results = list(self._pool.map(self._run, [schedule] * n))
        self.batch_seconds += time.monotonic() - t0
        self.batches += 1
        self.calls += n
        return results

    def reproduce(self, schedule: Schedule) -> tuple[int, int, RunResult | None]:
        """Up to `confirm_replays` replays: (failed, run, the last failing run). None starts
        after the deadline (the search left time for them at the mean batch time)."""
        hits = done = 0
        self.hit = None  # from here on, the last failing run of these replays
        while done < self.confirm_replays:
            n = min(self.parallel, self.confirm_replays - done)
            try:
                hits += self._showing(schedule, n, keep_reserve=False)
            except Stop:
                break
            done += n
        return hits, done, self.hit
