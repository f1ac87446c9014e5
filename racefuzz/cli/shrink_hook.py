"""The campaign's shrink hook: what `racefuzz run` does with a new cluster (shrink its smallest
member to a ticket bundle), and how a shrink's result is written back into the cluster's record
without losing a reproducer it already had.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from racefuzz.campaign.loop import ShrinkHook
from racefuzz.campaign.state import FindingRecord, preference, reproducer
from racefuzz.cli.shrink_command import shrink_to_bundle
from racefuzz.execute.executor import Launcher
from racefuzz.execute.runner import Runner
from racefuzz.judge.identity import ClusterState, ShrinkStop
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.shrink import result as shrink_result
from racefuzz.shrink.runs import shown_cluster


def make_shrink_hook(
    runner: Runner,
    spec: str,
    budget: float | None,
    root: Path,
    note: Callable[[str], None] = lambda line: None,
    parallel: int = 1,
    cap_s: float = shrink_result.MAX_BUDGET_S,
) -> ShrinkHook:
    """What a campaign does with a new cluster: shrink its smallest member to a bundle.

    Without a `budget`, each shrink gets `shrink_result.budget_for` the cost of the failing
    run, so a slow GPU run gets proportionally more time, and a rare failure's larger checks
    more again (`stretch_budget`); a given budget too small for that is said.
    `cap_s` bounds each shrink all the same (`shrink_result.campaign_cap`): inside a campaign
    that still fuzzes, one shrink must not take the time every other cluster waits for.
    """

    def hook(
        record: FindingRecord,
        schedule: Schedule,
        failing: RunResult,
        launcher: Launcher | None,
        between: Callable[[], float] | None = None,
    ) -> None:
        run_s = max(failing.seconds, 1e-3)
        given = budget is not None
        seconds = budget if budget is not None else shrink_result.budget_for(run_s)
        if given and seconds < 60 * run_s:
            note(
                f"shrink budget {seconds:.0f} s allows only ~{seconds / run_s:.0f} runs at "
                f"{run_s:.1f} s a run: raise --shrink-budget (or leave it out to scale it)"
            )
        result, bundle = shrink_to_bundle(
            runner,
            spec,
            schedule,
            record.finding,
            failing,
            root,
            budget_s=seconds,
            stretch_budget=not given,
            budget_cap_s=cap_s,
            launcher=launcher,
            best_path=record.best_path,
            found=record.smallest,
            parallel=parallel,
            between=between,
        )
        k, n = result.reproduction
        if reproducer(record):
            # Shrinking again (going on from a cut, or for a more dependable reproducer): a
            # flaky miss or a worse result must not lose the reproducer the cluster has.
            assert record.minimal is not None and record.reproduction is not None
            old = preference(record.minimal, record.reproduction)
            same = result.final == record.minimal  # then the newer shrink's facts stand
            if not result.confirmed or (not same and preference(result.final, (k, n)) > old):
                shutil.rmtree(bundle, ignore_errors=True)
                got = f"{len(result.final.steps)} steps" if result.confirmed else "none reproduced"
                record.retry = f"shrinking it again found no better reproducer ({got}, {k}/{n})"
                record.status = ClusterState.SHRUNK  # the reproducer it had stands
                return
        record.reproduction = (k, n)
        record.bundle = bundle
        record.adopted_from, record.retry = None, ""
        if result.confirmed:
            record.minimal = result.final
            failed = result.last_failure.findings if result.last_failure else ()
            record.shrunk_to = shown_cluster(result.signature, result.symptom, failed)
            record.cut_short = result.stopped is ShrinkStop.BUDGET
            record.status = ClusterState.SHRUNK
        else:
            record.status = ClusterState.NOT_REPRODUCED

    return hook
