"""`racefuzz run --ray`: join the Ray cluster and set up its nodes before the campaign starts.

Ray is imported here only, and only with `--ray`: without it nothing of Ray loads.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from racefuzz.errors import RacefuzzError
from racefuzz.execute.executor import RunOptions
from racefuzz.targets.model import Target

if TYPE_CHECKING:
    from racefuzz.fleet.pool import RayFleet

MIN_RAY = (2, 50)


def start(args: argparse.Namespace, target: Target, options: RunOptions) -> RayFleet:
    """A fleet of checked node slots; one line per node, kept or left out (and why)."""
    try:
        import ray
    except ImportError:
        raise RacefuzzError(
            "--ray needs Ray here and on every node: pip install 'racefuzz[ray]'"
        ) from None
    version = tuple(int(p) for p in ray.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_RAY:
        need = ".".join(map(str, MIN_RAY))
        raise RacefuzzError(f"Ray {ray.__version__} is too old: --ray needs {need} or newer")
    from racefuzz.fleet.pool import RayFleet

    resumed = getattr(args, "resumed", None)
    given = resumed is not None and "jobs" in resumed.given
    fleet = RayFleet(
        target,
        args.target,
        options,
        zygote=args.zygote,
        persistent=args.persistent,
        per_node=args.jobs if given else None,  # else each node's CPUs (or GPUs)
        say=lambda line: print(f"racefuzz: {line}", flush=True),  # the campaign's log later
    )
    try:
        fleet.start(args.ray)
    except BaseException:  # Ctrl-C or no usable node: no actor outlives the command
        fleet.shutdown()
        raise
    return fleet
