"""A fuzzing campaign: strategies feed `--jobs` isolated workers until the time is up.

Orchestration is trio: one task per job slot, each running blocking executor calls in a thread
(`trio.to_thread`), so a slow or dying worker only costs its own slot. The strategy is shared
and called only from trio's thread, so it needs no locks.

Nothing found is ever lost: the first schedule of every new cluster (`campaign_state`) is
written to `findings/<slug>.json` (exclusively created) before anything else is done with it,
then it is classified against its baseline and its smallest member queued for shrinking; shrinks
share the job slots with fuzzing and take precedence. Cancellation (deadline, Ctrl-C, SIGTERM)
kills every worker, those of abandoned tasks too; the caller then writes the summary from
`CampaignState`, which holds only small per-cluster records, so the campaign's memory stays
flat however long it runs. racefuzz's own exceptions stop the campaign as internal errors.

The campaign publishes what happens (`CampaignState`, log lines) and never reads the dashboard.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil
import trio

from racefuzz import strategies
from racefuzz.campaign import store as campaign_store
from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.disk_reserve import Reserve
from racefuzz.campaign.folder_writes import FolderWrites
from racefuzz.campaign.lending import Lending, lend_slot
from racefuzz.campaign.state import AloneUnderOverlap, CampaignState, FindingRecord
from racefuzz.campaign.tasks import BASELINE, SHRINK, TaskQueue
from racefuzz.errors import InternalError
from racefuzz.execute import executor
from racefuzz.execute.executor import Launcher
from racefuzz.execute.runner import Runner
from racefuzz.execute.zygote_pool import LauncherClosed
from racefuzz.judge.baseline import ALONE, Baselines
from racefuzz.judge.identity import ClusterState
from racefuzz.judge.outcome import Exit, Finding, RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.strategies.space import space_for
from racefuzz.targets.model import Target

# How long the end waits for abandoned tasks, whose workers it killed, to finish writing.
TASK_SETTLE_S = 10.0
PERSIST_TICKS = 10  # of the half-second monitor: findings.json is rewritten every 5 s

# (cluster, schedule to shrink, its failing run, the slot's launcher, what lends the slot to
# fuzzing between candidates)
ShrinkHook = Callable[
    [FindingRecord, Schedule, RunResult, "Launcher | None", "Callable[[], float] | None"], None
]


class Campaign(FolderWrites):
    def __init__(
        self,
        target: Target,
        config: CampaignConfig,
        out_dir: Path,
        baselines: Baselines | None = None,
        shrink_hook: ShrinkHook | None = None,
        restored: Sequence[FindingRecord] = (),
        stop_when: Callable[[Finding], bool] | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.target = target
        self.config = config
        self.out_dir = out_dir
        self.state = CampaignState(seconds=config.seconds, jobs=config.jobs)
        self.space = space_for(
            target, config.max_steps, config.max_threads, config.lifecycle, config.allow_misuse
        )
        self.strategy = strategies.make(
            config.strategy, self.space, config.seed, corpus=config.corpus
        )
        # How schedules run: the command's Runner, or one made from the config.
        self.runner = runner or Runner(
            target,
            executor.RunOptions(
                step_timeout=config.step_timeout, max_rss_mb=config.max_rss_mb, seed=config.seed
            ),
            zygote=config.zygote,
        )
        self.baselines = baselines
        self.shrink_hook = shrink_hook
        # What to do whenever the folder's durable state changed (`campaign_store`): the
        # caller rewrites findings.json, so a SIGKILL loses at most seconds of counters.
        self.persist: Callable[[], None] | None = None
        self.write_error = ""  # set when the output folder refused a write (a full disk)
        self.reserve: Reserve | None = None  # room kept for the summary after a full disk
        self._restored = list(restored)
        for rec in self._restored:  # an earlier run's clusters, as it left them
            rec.known = rec.cluster in config.known_issues
            self.state.findings[rec.cluster] = rec
        for rec in self._restored:  # a folder written before duplicates gave their schedules
            self.state.adopt(rec)
        self.stop_when = stop_when  # e.g. a benchmark's "this is the bug I was timing"
        self._cancel: trio.CancelScope | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        # Read by worker threads (trio's cancel scope may not be): the campaign is ending.
        self._stopping = False
        self._ends_at = float("inf")
        self._tasks = TaskQueue(config.jobs)  # baselines and shrinks, before fuzzing more
        self._alone = AloneUnderOverlap()
        for rec in self._restored:
            self._alone.know(rec.finding)
        self._fuzzing = config.fuzz  # False once the strategy has nothing more
        (out_dir / "findings").mkdir(parents=True, exist_ok=True)
        (out_dir / "corpus").mkdir(parents=True, exist_ok=True)

    def note(self, line: str) -> None:
        self.state.log.append(f"[{self.state.elapsed():6.1f}s] {line}")
        self.state.log_total += 1

    # --- the loop -----------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Stop the campaign as if its time were up (safe from a signal handler, from any
        thread, before or during `run`): a Ctrl-C or SIGTERM that lands anywhere is kept."""
        self.state.interrupted = True
        self.state.interrupted_by = self.state.interrupted_by or reason
        token = self._token
        if token is not None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._cancel_now)

    def _cancel_now(self) -> None:
        self._stopping = True
        if self._cancel is not None:
            self._cancel.cancel()

    async def run(self) -> CampaignState:
        self._token = trio.lowlevel.current_trio_token()
        self._ends_at = time.monotonic() + self.config.seconds
        retry = not self.config.fuzz  # --shrink-only: also what did not reproduce, afresh
        for rec in self._restored:  # shrinks the resumed run did not finish, from its best
            if campaign_store.needs_shrinking(rec, retry_unreproduced=retry):
                self._queue_shrink(rec, functools.partial(campaign_store.best_so_far, rec))
        self._persist()
        try:
            with trio.move_on_after(self.config.seconds) as scope:
                self._cancel = scope
                if self.state.interrupted:  # a stop asked for before the loop began
                    scope.cancel()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._monitor)
                    async with trio.open_nursery() as jobs:
                        for slot in range(self.config.jobs):
                            jobs.start_soon(self._job, slot)
                    nursery.cancel_scope.cancel()  # every slot is done: no need to wait
        finally:
            self.runner.close()  # an abandoned task's next run is refused, its last one void
            executor.kill_all()  # every worker, those of abandoned tasks too (a hung EP's)
            self._tasks.settle(TASK_SETTLE_S)
            self.state.lost = self.runner.lost()
            stopped = self.state.interrupted or bool(self.write_error)
            unfinished = (ClusterState.NEW, ClusterState.SHRINKING, ClusterState.INTERRUPTED)
            for rec in self.state.findings.values():
                if rec.status in unfinished:
                    rec.status = ClusterState.INTERRUPTED if stopped else ClusterState.TIME_UP
            self.state.done = True
        return self.state

    async def _monitor(self) -> None:
        me = psutil.Process()
        for tick in itertools.count(1):
            self.state.campaign_rss_mb = me.memory_info().rss / 2**20
            self.state.lost = self.runner.lost()
            if tick % PERSIST_TICKS == 0:
                self._persist()  # counters too, so a SIGKILL loses seconds, not the run
            await trio.sleep(0.5)

    async def _job(self, slot: int) -> None:
        launcher = self.runner.launcher()
        try:
            await self._job_loop(launcher)
        finally:
            if launcher is not None:
                launcher.close()

    async def _job_loop(self, launcher: Launcher | None) -> None:
        while True:
            if self._tasks.may_take(self._fuzzing):
                label, task = self._tasks.take()
                self.note(label)
                self._tasks.slots += 1
                t0 = time.monotonic()
                try:
                    failure, error = await trio.to_thread.run_sync(
                        self._tasks.guarded, task, launcher, abandon_on_cancel=True
                    )
                    if isinstance(error, OSError) and self._output_failed(error):
                        pass  # e.g. a bundle on a full disk: the cluster stays unshrunk
                    elif failure:
                        self.internal_error(f"in a task ({label}):\n{failure}")
                finally:
                    self._tasks.slots -= 1
                    self._tasks.task_s += time.monotonic() - t0
                self._persist()
                continue
            schedule = self.strategy.next_schedule() if self._fuzzing else None
            if schedule is None:  # nothing more to fuzz: the tasks left get every slot
                self._fuzzing = False
                if self._tasks:
                    continue
                return
            source = getattr(self.strategy, "last_source", None) or self.strategy.name
            self.state.busy += 1
            t0 = time.monotonic()
            try:
                result = await trio.to_thread.run_sync(
                    self._execute, schedule, launcher, abandon_on_cancel=True
                )
            except LauncherClosed:
                return  # the campaign ended between handing out the schedule and running it
            except InternalError as e:
                self.internal_error(f"running a schedule:\n{e}")
                return
            finally:
                self.state.busy -= 1
                self._tasks.fuzz_s += time.monotonic() - t0
            self._record(result, str(source))

    def _lend_slot(self, launcher: Launcher | None, account: Lending) -> float:
        spent = lend_slot(
            account,
            lambda: self._fuzzing and not self._stopping,
            self._next_fuzz,
            lambda schedule: self._execute(schedule, launcher),
            self._record,
        )
        self._tasks.lent(spent)
        return spent

    def _next_fuzz(self) -> tuple[Schedule | None, str]:
        schedule = self.strategy.next_schedule()
        source = getattr(self.strategy, "last_source", None) or self.strategy.name
        return schedule, str(source)

    def internal_error(self, text: str) -> None:
        """Keep racefuzz's own traceback and stop: results of a broken tool are not trusted."""
        self.state.internal_errors.append(text)
        self.note("racefuzz internal error: the campaign stops (see the summary)")
        self._cancel_now()

    def _execute(self, schedule: Schedule, launcher: Launcher | None) -> RunResult:
        # An abandoned task's next run once the campaign is ending (deadline, Ctrl-C, SIGTERM,
        # an internal error): refused, so that no worker starts after the final kill.
        if self._stopping or time.monotonic() >= self._ends_at:
            raise LauncherClosed("the campaign has ended")
        return self.runner.run(schedule, launcher)

    def _record(self, result: RunResult, source: str) -> None:
        st = self.state
        st.schedules += 1
        st.steps += len(result.outcomes)
        st.worker_rss_mb = max(st.worker_rss_mb, result.peak_rss_mb)
        st.crashes += result.exit is Exit.CRASH
        st.hangs += result.exit is Exit.HANG
        if result.exit is Exit.KILLED:
            st.killed += 1
            self.note(
                f"a worker was killed from outside racefuzz ({result.signal}): not a finding; "
                "if this repeats, look for the OOM killer (dmesg)"
            )
        counters = st.by_strategy.setdefault(source, {"schedules": 0, "new": 0})
        counters["schedules"] += 1
        self.strategy.observe(result)
        # A misroute (the testbed's white-box trace) beside a visible failure is that failure's
        # explanation, shown in its report, not a root cause of its own: only a silent misroute
        # (nothing else went wrong) opens a cluster.
        visible = any(f.kind != "misroute" for f in result.findings)
        routed = [self._alone.route(f) for f in result.findings]
        for f in routed:
            rec = st.findings.get(f.cluster)
            if rec is not None:
                if rec.add_member(f, result):  # shrinking starts from the smallest member
                    self._writing(functools.partial(campaign_store.save_smallest, rec))
                if self.baselines is not None and self._alone.first_sight(f, rec):
                    self._check_symptom(f, result)
                continue
            if visible and f.kind == "misroute":
                continue
            if self._new_finding(f, result).verdict == "new":
                counters["new"] += 1  # known issues and misuse are no yield of a strategy
        # Any finding counts, a new cluster's or a member's: the bug was seen in this run.
        hit = next(
            (
                f
                for f in routed
                if self.stop_when and f.cluster in st.findings and self.stop_when(f)
            ),
            None,
        )
        if hit is not None:
            self.note(f"stop: {hit.kind} on {hit.op} is what this campaign was looking for")
            self._cancel_now()

    def _new_finding(self, finding: Finding, result: RunResult) -> FindingRecord:
        path = campaign_store.unique_path(self.out_dir / "findings", finding.slug)
        rec = FindingRecord(
            finding,
            1,
            self.state.elapsed(),
            path,
            smallest=result.schedule,
            smallest_result=result,
            signatures={finding.signature},
            known=finding.cluster in self.config.known_issues,
        )
        rec.seen_at(result)
        self.state.findings[finding.cluster] = rec
        self.state.open_duplicate(rec)
        # On disk first: whatever happens next (a baseline crash, Ctrl-C, SIGKILL), this is kept.
        self._writing(functools.partial(campaign_store.save_new, self.out_dir, rec, result))
        word = {"misuse": "MISUSE", "known": "KNOWN"}.get(rec.verdict, "NEW")
        self.note(f"{word} {finding.kind} on {finding.op}: {finding.message[:60]}")
        baselines = self.baselines
        if baselines is None or finding.step is None or finding.misuse or finding.origin:
            self._queue_shrink(rec, lambda: rec.smallest)
        else:

            def classify(launcher: Launcher | None) -> None:
                # Through this slot's launcher: the baseline ends with the slot, never outlives
                # the campaign on a hung EP.
                run = lambda s: self._execute(s, launcher)  # noqa: E731
                holder: FindingRecord | None = None
                try:
                    rec.finding = baselines.classify(result.schedule, rec.finding, run)
                    holder = self._alone.learn(self.state, rec)
                finally:
                    self._after_baseline(rec, holder)

            self._tasks.add(BASELINE, finding, _baseline_label(finding), classify)
        self._persist()
        return rec

    def _check_symptom(self, finding: Finding, result: RunResult) -> None:
        """The baseline of a symptom first seen inside another symptom's overlap cluster: one
        that fails alone opens its own cluster (`AloneUnderOverlap.first_sight`)."""
        baselines = self.baselines
        assert baselines is not None

        def classify(launcher: Launcher | None) -> None:
            run = lambda s: self._execute(s, launcher)  # noqa: E731
            checked = baselines.classify(result.schedule, finding, run)
            self._alone.know(checked)
            if checked.origin == ALONE:
                opened = self._alone.route(checked)
                with contextlib.suppress(trio.RunFinishedError, trio.Cancelled):
                    trio.from_thread.run_sync(self._open_alone, opened, result)

        self._tasks.add(BASELINE, finding, _baseline_label(finding), classify)

    def _open_alone(self, finding: Finding, result: RunResult) -> None:
        if finding.cluster not in self.state.findings:
            self._new_finding(finding, result)

    def _after_baseline(self, rec: FindingRecord, holder: FindingRecord | None) -> None:
        """Shrink a cluster once its baseline is known (a symptom that fails alone under
        overlap clustering moved to its symptom's cluster, `AloneUnderOverlap`), unless it was
        counted into a cluster that held its symptom already."""
        if holder is not None and holder is not rec:
            self.note(
                f"{rec.finding.kind} on {rec.finding.op} fails alone: one cluster with "
                f"'{holder.cluster}'"
            )
        else:
            if holder is rec:
                rec.known = rec.cluster in self.config.known_issues
                self.note(
                    f"{rec.finding.kind} on {rec.finding.op} fails alone: its cluster is "
                    f"'{rec.cluster}', whatever overlapped before it"
                )
            self._queue_shrink(rec, lambda: rec.smallest)
        self._persist()

    def _queue_shrink(self, rec: FindingRecord, start: Callable[[], Schedule]) -> None:
        """Shrink a cluster from `start()` (its smallest member, or a restored shrink's best so
        far) in a job slot; known issues are listed, not shrunk."""
        hook = self.shrink_hook
        if rec.known:
            rec.status = ClusterState.KNOWN
            return
        if not self.config.shrink or hook is None or rec.smallest_result is None:
            return

        def shrink(launcher: Launcher | None) -> None:
            rec.status = ClusterState.SHRINKING
            assert rec.smallest_result is not None
            # A retried shrink's bundle, one a cut-short shrink left, or a cluster's own that a
            # duplicate's better one replaced: once no cluster lists it, it goes.
            before = self._bundles()
            account = Lending()
            hook(
                rec,
                start(),
                rec.smallest_result,
                launcher,
                lambda: self._lend_slot(launcher, account),
            )
            self.state.mark_duplicate(rec)
            for gone in before - self._bundles():
                shutil.rmtree(gone, ignore_errors=True)

        label = f"shrinking {rec.finding.kind} on {rec.finding.op}"
        self._tasks.add(SHRINK, rec.finding, label, shrink)


def _baseline_label(finding: Finding) -> str:
    return f"baseline of {finding.kind} on {finding.op}"
