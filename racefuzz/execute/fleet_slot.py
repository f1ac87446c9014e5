"""What the runner holds of a Ray fleet: a job slot that runs whole schedules on some node.

Kept free of Ray (the runner, the campaign and the shrinker import it): the fleet itself
(`racefuzz.fleet.pool`, which imports Ray) reaches them only as a `Fleet`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from racefuzz.errors import InternalError
from racefuzz.execute.executor import Launched, RunOptions
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule


class Fleet(Protocol):
    """The driver's side of the fleet (`pool.RayFleet`)."""

    @property
    def lost(self) -> int:
        """Runs a node took with it (it died or left the cluster): never findings."""
        ...

    def run(self, schedule: Schedule, options: RunOptions, device: str | None) -> RunResult:
        """Run on an idle node actor (of `device`'s kind, when the fleet still has one) and
        return its judged result; a run lost with its node is counted and run again."""
        ...

    def node_env(self, node: str) -> dict[str, Any] | None:
        """What `envinfo.collect` said on that node, for a bundle's env.json."""
        ...

    def close(self) -> None:
        """Stop every actor (their runs end with them); later runs raise `LauncherClosed`."""
        ...


class FleetSlot:
    """One job slot's way onto the fleet. The run is supervised and judged on its node (stderr,
    traces and the EP library live there), so this is no `Launcher` of local workers."""

    def __init__(self, fleet: Fleet, device: str | None = None) -> None:
        self.fleet = fleet
        self.device = device  # a shrink's replays go to the device kind that failed

    def run(self, schedule: Schedule, options: RunOptions) -> RunResult:
        return self.fleet.run(schedule, options, self.device)

    def pinned(self, device: str) -> FleetSlot:
        """This slot's runs, on `device`'s kind of node ("" : any)."""
        return FleetSlot(self.fleet, device or None)

    def launch(self, job: str, env: dict[str, str], err_path: Path, tmp: Path) -> Launched:
        raise InternalError("a fleet slot runs whole schedules on its node (Runner.run)")

    def close(self) -> None:
        """The fleet's actors outlive a slot: `Fleet.close` stops them."""
