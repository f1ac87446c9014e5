"""One command's way of running schedules, built once: the target, the limits a run is held to
(`RunOptions`), and whether workers are forked from a zygote or spawned.

Every command (run, shrink, replay, doctor) builds one `Runner` from its arguments and hands
it to whatever runs schedules for it: the campaign's job slots, baselines, the shrink hook, the
preflight finding. So a run's limits and its launcher policy are decided in one place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from racefuzz.execute import executor
from racefuzz.execute.executor import Launcher, RunOptions
from racefuzz.execute.fleet_slot import Fleet, FleetSlot
from racefuzz.execute.hang_limit import HangLimit
from racefuzz.execute.persistent_pool import PersistentLauncher, confirm
from racefuzz.execute.unconfirmed import write_unconfirmed
from racefuzz.execute.zygote_pool import LauncherClosed, ZygoteLauncher
from racefuzz.execute.zygote_pool import available as zygote_available
from racefuzz.judge.identity import ClusterKey
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.targets.model import Target


@dataclass(frozen=True)
class Runner:
    target: Target
    options: RunOptions = field(default_factory=RunOptions)
    zygote: bool = True  # fork workers where the target allows it (`--spawn` turns it off)
    # One worker process per slot serving schedules while they end whole (`--persistent`;
    # always for ThreadSanitizer targets, whose workers no zygote can fork).
    persistent: bool = False
    # Where a finding a fresh worker never showed again is written (`persistent_pool`); None:
    # the command has no output folder, and such a finding is only counted.
    unconfirmed_dir: Path | None = None
    # The finding identities a fresh worker has shown (`persistent_pool.confirm`).
    confirmed: set[ClusterKey] = field(default_factory=set, compare=False, repr=False)
    # Confirm every failure after earlier schedules in a fresh worker, identities shown before
    # or not: a shrink's candidates and its reproduction count must be the schedule's own.
    strict: bool = False
    # Schedules run on a Ray cluster's nodes (`--ray`), judged there; None: on this machine.
    fleet: Fleet | None = field(default=None, compare=False)
    _closed: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    # Shared by every copy (`dataclasses.replace` passes it on): one target, one judgement.
    hang_limit: HangLimit = field(default_factory=HangLimit, compare=False, repr=False)

    @property
    def forks(self) -> bool:
        """Whether workers are forked (about 2x faster per run; some platforms cannot fork). A
        sanitizer's runtime is preloaded into the zygote itself (`ZygoteLauncher`)."""
        return self.zygote and zygote_available()

    def launcher(self) -> ZygoteLauncher | PersistentLauncher | FleetSlot | None:
        """A launcher for one job slot, which its caller closes; None: spawn each worker. With
        `persistent`, and always for a ThreadSanitizer target (whose workers cannot be forked
        with onnxruntime loaded), the slot keeps one worker process serving schedules while
        they leave it whole (`persistent_pool`). On a fleet: a slot running on its nodes."""
        if self.fleet is not None:
            return FleetSlot(self.fleet)
        if not self.forks:
            return None
        if self.persistent or self.target.sanitizer == "thread":
            return PersistentLauncher(self.target.trace_envs())
        return ZygoteLauncher()

    def close(self) -> None:
        """The command is ending (a campaign's deadline, Ctrl-C): a task abandoned in a thread
        (a shrink, a baseline) starts no more workers, and a run its end killed is no result."""
        self._closed.set()
        if self.fleet is not None:
            self.fleet.close()

    def lost(self) -> int:
        """Runs lost with a fleet's nodes so far (0 on one machine)."""
        return 0 if self.fleet is None else self.fleet.lost

    def run(self, schedule: Schedule, launcher: Launcher | None = None) -> RunResult:
        if self._closed.is_set():
            raise LauncherClosed("the command has ended")
        options = self.options
        limit = self.hang_limit.step_timeout(options.step_timeout)
        if limit < options.step_timeout:
            options = replace(options, step_timeout=limit)
        if self.fleet is not None:  # confirmed on its node, as a local slot would
            slot = launcher if isinstance(launcher, FleetSlot) else FleetSlot(self.fleet)
            result = slot.run(schedule, options)
        else:
            result = executor.run(self.target, schedule, options, launcher=launcher)
        if isinstance(launcher, PersistentLauncher):
            result = confirm(
                result,
                launcher,
                lambda: executor.run(self.target, schedule, options, launcher=launcher),
                # A shrink's candidate that only fails after others is no new finding.
                lambda seen, earlier: write_unconfirmed(
                    None if self.strict else self.unconfirmed_dir, seen, earlier
                ),
                set() if self.strict else self.confirmed,
            )
        if self._closed.is_set():
            raise LauncherClosed("the command ended while the schedule ran")
        self.hang_limit.observe(result)
        return result

    def through(self, launcher: Launcher | None) -> Callable[[Schedule], RunResult]:
        """`run` through one slot's launcher, for code that takes a plain run function."""
        return lambda schedule: self.run(schedule, launcher)
