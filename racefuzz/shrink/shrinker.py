"""Shrinking: from a failing schedule to a 1-minimal one that fails with the same signature.

Candidates are run only through `racefuzz.shrink.runs.Runs` (replays, in parallel batches when
asked, and the time budget), with the `run` function the caller wires to the executor.
`sort_key` is the one definition of "simpler"; the passes (`racefuzz.shrink.passes.PASSES`,
plain functions, biggest cuts first) propose candidates and
`_Shrinker.consider` keeps those that are simpler, well-formed (`schedule.model.problems`) and
still fail. The pass list is repeated until a full round changes nothing, the time budget is
spent, or too many candidates in a row led nowhere (the stall budget), as in Hypothesis' shrinker.

Failures under overlap are flaky, so "fails" means "shows the signature (`shrink_runs.shows`:
under overlap clustering, the cluster or a subset of its kinds of call) in at least `need` of
`replays` runs", with a recheck before a candidate is kept, and the final schedule is replayed
`confirm_replays` times to report its reproduction rate. A failure rarer than the checks assume
gets more replays per check (`shrink_runs.replays_for`, from the rate `Runs.measure` found for the
original), up to `max_replays`.

Under overlap clustering a cluster is the shape of the last overlap group before the failure,
which blames the wrong group when an earlier race left the EP broken for every later call (a
GPU device lost in `[create || create]` fails the `copy` of a later `[copy || alloc]`). So each
round first tries the schedule with that group no longer overlapping (`_blame_earlier`): if it
still fails the same way, under an earlier group's shape, the shrink goes on as a shrink of that
earlier group's cluster, and `ShrinkResult.signature` says so.

This module does not run schedules, classify findings or write reports: it only needs a `run`
that turns crashes and hangs into `RunResult`s (the executor guarantees that), and a signature.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from racefuzz.judge.identity import ShrinkStop
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule import contract
from racefuzz.schedule.model import Schedule, ScheduleError, problems
from racefuzz.shrink import best as shrink_best
from racefuzz.shrink.order import sort_key
from racefuzz.shrink.passes import PASSES, delete_steps, ungrouped, without
from racefuzz.shrink.result import MAX_BUDGET_S, PassStats, ShrinkEvent, ShrinkResult
from racefuzz.shrink.runs import Runs, Stop, replays_for, shows


class _Stall(Exception):
    """`max_stall` candidates in a row were tested without a cut."""


@dataclass
class _Tally:
    runs: int = 0
    candidates: int = 0
    calls: int = 0
    shrinks: int = 0


def shrink(
    schedule: Schedule,
    signature: str,
    run: Callable[[Schedule], RunResult],
    *,
    # One run showing the signature is proof the candidate can fail (oracles do not invent
    # findings), so need=1. Three tries miss a candidate failing half the time only 1 in 8, and
    # a miss merely costs one cut that a later round offers again.
    replays: int = 3,
    need: int = 1,
    # A kept candidate must fail again in a fresh 1-of-3: without it the shrinker drifts into
    # schedules that failed once by luck (a 5% one passes 1-of-3 14% of the time, both checks
    # 2%), whose low rate then stalls every later pass. It costs one run a cut when the bug
    # always shows. (0, 0) turns it off.
    # XX: tune by measurement on the testbed. On the tests' models of a bug showing in half
    # the runs, these defaults reach the known minimum 18-19 times in 20; replays=5 with
    # recheck=(1, 5) 20 in 20, for about 25% more runs.
    recheck: tuple[int, int] = (1, 3),
    confirm_replays: int = 20,
    # A check sized to a rare failure's rate stops here: 24 runs catch a 1-in-12 failure 7 times
    # in 8; a rarer one is better found again by fuzzing than shrunk at this cost a candidate.
    max_replays: int = 24,
    budget_s: float = 600.0,
    stretch_budget: bool = False,
    budget_cap_s: float = MAX_BUDGET_S,
    max_stall: int = 500,
    models_by_size: Sequence[str] = (),
    library_of: Callable[[str], str | None] | None = None,
    on_progress: Callable[[ShrinkEvent], None] | None = None,
    best_path: Path | None = None,
    parallel: int = 1,
    symptom: str | None = None,
    between: Callable[[], float] | None = None,
) -> ShrinkResult:
    """Shrink `schedule` to a simpler one whose runs still show `signature` (a finding's
    signature, or its cluster key: then any member of the cluster counts). `symptom` (the
    cluster key the failure had without overlap clustering) pins what the failure must look
    like under an overlap key, so the shrink cannot drift onto another cluster's failure.

    `budget_s` (wall clock) bounds everything, the first check of `schedule` and the final
    replays included: the search stops early enough to leave time, at the mean run time so far,
    for the `confirm_replays` final replays, and no run starts after the deadline, so a shrink
    ends at most one run late. A run already started is never interrupted (the executor's own
    timeout bounds it). A legal schedule (`racefuzz.schedule.contract`) only shrinks to legal ones.
    With `stretch_budget` (a budget sized to a number of runs, `budget_for`), checks sized up for
    a rare failure stretch the budget by as much, to at most `MAX_BUDGET_S` (or `budget_s`)
    and never past `budget_cap_s` (a campaign's share for one shrink, `campaign_cap`).
    `best_path`, when given, holds the best schedule so far as JSON, complete at every moment.
    `between`, called before each batch of runs, lends the slot to other work (a campaign's
    fuzzing) and returns the seconds it took, which do not count against the budget.
    Raises `ScheduleError` if `schedule` is not well-formed, `ValueError` for impossible replay
    counts.
    """
    found = problems(schedule, library_of)
    if found:
        raise ScheduleError(f"cannot shrink an ill-formed schedule: {found[0]}")
    if not 0 < need <= replays:
        raise ValueError(f"need must be within 1..replays, not {need} of {replays}")
    if not 0 <= recheck[0] <= recheck[1]:
        raise ValueError(f"recheck must be k of n with k <= n, not {recheck[0]} of {recheck[1]}")
    if max_replays < 1:
        raise ValueError(f"max_replays must be at least 1, not {max_replays}")
    shrinker = _Shrinker(
        schedule,
        signature,
        run,
        check=(need, replays),
        recheck=recheck,
        confirm_replays=confirm_replays,
        max_replays=max_replays,
        budget_s=min(budget_s, budget_cap_s),
        stretch_budget=stretch_budget,
        budget_cap_s=budget_cap_s,
        max_stall=max_stall,
        models_by_size=models_by_size,
        library_of=library_of,
        on_progress=on_progress,
        best_path=best_path,
        parallel=parallel,
        symptom=symptom,
    )
    shrinker.runs.lend(between)
    try:
        return shrinker.shrink()
    finally:
        shrinker.runs.close()  # also when a run raised (the campaign ended under it)


class _Shrinker:
    """The state passes see (`shrink_passes.Shrinking`) and the loop around them."""

    def __init__(
        self,
        original: Schedule,
        signature: str,
        run: Callable[[Schedule], RunResult],
        *,
        check: tuple[int, int],
        recheck: tuple[int, int],
        confirm_replays: int,
        max_replays: int,
        budget_s: float,
        stretch_budget: bool,
        budget_cap_s: float,
        max_stall: int,
        models_by_size: Sequence[str],
        library_of: Callable[[str], str | None] | None,
        on_progress: Callable[[ShrinkEvent], None] | None,
        best_path: Path | None,
        parallel: int,
        symptom: str | None,
    ) -> None:
        self.original = self.current = original
        self.legal_only = contract.is_legal(original, library_of)
        self.signature = signature
        self.check, self.recheck = check, recheck
        self.confirm_replays, self.max_replays = confirm_replays, max_replays
        self.measured = (0, 0)
        self.budget_s = budget_s if stretch_budget else None
        self.budget_cap_s = budget_cap_s
        self.max_stall = max_stall
        self.models_by_size = models_by_size
        self.library_of = library_of
        self.on_progress = on_progress
        self.best_path = best_path
        self.started = time.monotonic()
        self.runs = Runs(
            run, signature, self.started + budget_s, confirm_replays, parallel, symptom
        )
        self.key = sort_key(original, models_by_size)
        self.tallies = {"blame": _Tally()} | {p.__name__: _Tally() for p in PASSES}
        self.tallies["verify"] = _Tally()
        self.phase = "check"
        self.rejected: set[Schedule] = set()  # within one round; see `_search`
        self.candidates = self.stall = 0
        self.last_failure: RunResult | None = None

    # --- what passes call ---------------------------------------------------------------------

    def delete(self, indices: Iterable[int]) -> Schedule | None:
        return without(self.current, indices, self.library_of)

    def consider(
        self, candidate: Schedule | None, match: Callable[[Finding], bool] | None = None
    ) -> bool:
        """Keep `candidate` if it is simpler and fails with the signature (with a finding
        `match` accepts, when given)."""
        if candidate is None or candidate in self.rejected:
            return False
        key = sort_key(candidate, self.models_by_size)
        if not key < self.key or problems(candidate, self.library_of):
            return False
        if self.legal_only and not contract.is_legal(candidate, self.library_of):
            return False  # shrinking must not turn an EP bug into an API misuse
        if self.phase != "verify" and self.stall >= self.max_stall:
            raise _Stall
        tally = self.tallies[self.phase]
        calls = self.runs.calls
        self.candidates += 1
        tally.candidates += 1
        try:
            fails = self.runs.fails(candidate, *self.check, match=match) and self.runs.fails(
                candidate, *self.recheck, match=match
            )
        finally:
            tally.calls += self.runs.calls - calls
        if fails:
            self.current, self.key, self.last_failure = candidate, key, self.runs.hit
            tally.shrinks += 1
            self.stall = 0
            self._save_best()
        else:
            self.rejected.add(candidate)
            self.stall += 1
        self._progress(improved=fails)
        return fails

    # --- the loop -----------------------------------------------------------------------------

    def shrink(self) -> ShrinkResult:
        self._save_best()
        self._progress(improved=False)
        stopped, one_minimal, reproduction = ShrinkStop.DONE, False, (0, 0)
        try:
            tries = max(self.check[1], self.confirm_replays)
            self.measured = self.runs.measure(self.original, tries, self.check[1])
            if self.measured[0]:
                self.last_failure = self.runs.hit
                self._size_checks(self.measured[0] / self.measured[1])
                stopped, one_minimal = self._search_and_verify()
            else:
                stopped, reproduction = ShrinkStop.NOT_REPRODUCED, (0, tries)
        except Stop:
            stopped = ShrinkStop.BUDGET
        if stopped is not ShrinkStop.NOT_REPRODUCED:
            reproduction = self._reproduce()
        return ShrinkResult(
            original=self.original,
            final=self.current,
            signature=self.signature,
            passes=tuple(PassStats(name, **vars(t)) for name, t in self.tallies.items()),
            candidates=self.candidates,
            calls=self.runs.calls,
            seconds=time.monotonic() - self.started - self.runs.yielded,
            one_minimal=one_minimal,
            reproduction=reproduction,
            measured=self.measured,
            check=self.check,
            budget_s=self.runs.deadline - self.started - self.runs.yielded,
            last_failure=self.last_failure,
            stopped=stopped,
            symptom=self.runs.symptom or "",
        )

    def _size_checks(self, rate: float) -> None:
        """More replays per check (and recheck) for a rarer failure: see `shrink_runs`."""
        (need, n), (k, m) = self.check, self.recheck
        self.check = (need, replays_for(need, n, rate, max(n, self.max_replays)))
        if self.budget_s is not None:
            stretched = self.budget_s * self.check[1] / n
            limit = min(max(self.budget_s, MAX_BUDGET_S), self.budget_cap_s)
            self.runs.deadline = self.started + self.runs.yielded + min(stretched, limit)
        if m:
            self.recheck = (k, replays_for(k, m, rate, max(m, self.max_replays)))

    def _search_and_verify(self) -> tuple[ShrinkStop, bool]:
        """Rounds of passes, then the 1-minimality check; a cut found there restarts the rounds."""
        while True:
            try:
                self._search()
                stopped = ShrinkStop.DONE
            except _Stall:
                stopped = ShrinkStop.STALL
            # Every single deletion again, afresh: the last round rejected them all, but under a
            # flaky bug a rejection may be bad luck, and a cut found here restarts the rounds.
            # After a stall this is what tells whether the result is 1-minimal anyway.
            self.rejected.clear()
            self.phase = "verify"
            self.tallies["verify"].runs += 1
            before = self.current
            delete_steps(self)
            if self.current == before:
                return stopped, True
            self.stall = 0

    def _search(self) -> None:
        while True:
            # A candidate rejected in an earlier round gets another chance: with a flaky bug the
            # rejection may have been bad luck. Within a round the cache saves repeated runs.
            self.rejected.clear()
            before = self.current
            self.phase = "blame"
            self.tallies["blame"].runs += 1
            self._blame_earlier()
            for p in PASSES:
                self.phase = p.__name__
                self.tallies[self.phase].runs += 1
                self._progress(improved=False)
                p(self)
            if self.current == before:
                return

    def _blame_earlier(self) -> None:
        """Offer the schedule with the failure's overlap group no longer overlapping; kept when
        it fails with the same symptom under an earlier group's shape, which then becomes the
        signature: that earlier race broke the EP, not the overlap that happened to follow."""
        failure = self.last_failure
        seen = failure.findings if failure else ()
        caught = next(
            (f for f in seen if shows(self.signature, f, self.runs.symptom) and f.overlap), None
        )
        if failure is None or caught is None:
            return
        at = failure.placed_at(caught)  # as the oracle placed it: a crash between steps too
        spans = [(a, b) for a, b in self.current.groups() if a <= at and b - a > 1]
        if not spans:
            return

        def earlier(f: Finding) -> bool:
            return bool(f.overlap) and f.misuse == caught.misuse and f.symptom == caught.symptom

        # The signature itself counts too, or a cut `drop_groups` would keep stays rejected.
        def either(f: Finding) -> bool:
            return shows(self.signature, f, self.runs.symptom) or earlier(f)

        if self.consider(ungrouped(self.current, range(*spans[-1])), match=either):
            hit = self.runs.hit.findings if self.runs.hit else ()
            if not any(shows(self.signature, f, self.runs.symptom) for f in hit):
                self.signature = self.runs.signature = next(f.cluster for f in hit if earlier(f))
                self._save_best()

    def _reproduce(self) -> tuple[int, int]:
        self.phase = "reproduce"
        hits, done, last = self.runs.reproduce(self.current)
        self.last_failure = last or self.last_failure
        self._progress(improved=False)
        return hits, done

    # --- reporting ----------------------------------------------------------------------------

    def _progress(self, improved: bool) -> None:
        if self.on_progress is not None:
            cur = self.current
            self.on_progress(
                ShrinkEvent(
                    self.phase,
                    len(cur.steps),
                    cur.threads,
                    self.candidates,
                    self.runs.calls,
                    improved,
                )
            )

    def _save_best(self) -> None:
        if self.best_path is not None:
            shrink_best.save(self.best_path, self.signature, self.current)
