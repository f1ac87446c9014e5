"""The bodies of the subcommands: each takes parsed arguments and returns an exit code.

Kept apart from `cli` so that argument parsing stays import-light and so that each command
reads top to bottom: load the target, do the work, render, decide the code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.execute.replay import replay
from racefuzz.execute.runner import Runner
from racefuzz.judge.baseline import Baselines
from racefuzz.report import console as render
from racefuzz.schedule.json_io import load_many
from racefuzz.targets import preflight
from racefuzz.targets.model import Target
from racefuzz.targets.registry import load_target, with_models

MIN_ORT = (1, 31)


def check_ort() -> str:
    import onnxruntime as ort

    version = str(ort.__version__)
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts < MIN_ORT:
        need = ".".join(map(str, MIN_ORT))
        raise RacefuzzError(f"onnxruntime {version} is too old: racefuzz needs {need} or newer")
    return version


def _target(args: argparse.Namespace) -> Target:
    """The target, checked to load and to provide what its profiles ask for (one line else)."""
    check_ort()
    args.target = _target_spec(args)
    target = with_models(load_target(args.target, args.config), getattr(args, "models", None))
    if getattr(args, "ray", None) is not None:
        return target  # each Ray node probes the target itself (`fleet.pool`)
    for line in preflight.check(target):
        print(f"racefuzz: warning: {line}", file=sys.stderr, flush=True)
    return target


def _target_spec(args: argparse.Namespace) -> str:
    """`--target` as given; else a resumed campaign's own target, else the testbed. Resuming a
    campaign on another target would mix two targets' findings in one folder: refused."""
    given: str | None = args.target
    resume: Path | None = getattr(args, "resume", None)
    if resume is None:
        return given or "testbed"
    from racefuzz.campaign import store as campaign_store  # only a resume reads a campaign folder

    data = campaign_store.header(resume)
    spec = data.get("target_spec") or data.get("target")
    if not isinstance(spec, str):
        return given or "testbed"  # campaign_store.restore reports a damaged folder itself
    if given is not None and given != spec:
        raise RacefuzzError(
            f"cannot resume '{resume}' with --target {given}: it is a campaign on '{spec}' "
            "(leave --target out to continue it)"
        )
    return spec


def _runner(args: argparse.Namespace, target: Target) -> Runner:
    """How this command runs schedules: a fresh worker for each run (too few to fork)."""
    if args.step_timeout <= 0:
        raise RacefuzzError("--step-timeout must be positive")
    options = executor.RunOptions(step_timeout=args.step_timeout, seed=args.seed)
    return Runner(target, options, zygote=False)


def replay_command(args: argparse.Namespace) -> int:
    if args.times < 1:
        raise RacefuzzError("--times must be at least 1")
    target = _target(args)
    schedules = load_many(args.path)
    runner = _runner(args, target)
    out = Console()
    baselines = None if args.no_baseline else Baselines(target, runner.run)
    failed = skipped = misuse = 0
    for path, schedule in schedules:
        label = schedule.name or path.stem
        missing = target.missing(schedule)
        if missing and len(schedules) == 1:
            raise RacefuzzError(f"{path}: target '{target.name}' has no {', '.join(missing)}")
        if missing:
            out.print(f"[yellow]skipped[/] {label}: target '{target.name}' has no {missing[0]}")
            skipped += 1
            continue
        summary = replay(runner, schedule, args.times, baselines)
        render.print_summary(out, label, summary)
        failed += summary.failed
        misuse += summary.misuse_only
    ran = len(schedules) - skipped
    also = f", {misuse} API misuse only" if misuse else ""
    out.rule(
        f"{ran} schedule(s) replayed x{args.times}, {failed} with findings{also}, {skipped} skipped"
    )
    return 1 if failed else 0


def doctor_command(args: argparse.Namespace) -> int:
    from racefuzz.cli.doctor_command import doctor

    version = check_ort()
    args.target = _target_spec(args)
    target = with_models(load_target(args.target, args.config), args.models)
    return doctor(target, _runner(args, target), version)


def run_command(args: argparse.Namespace) -> int:
    from racefuzz.cli.resume_options import settle
    from racefuzz.cli.run_command import check_arguments
    from racefuzz.cli.run_command import run_command as run

    settle(args)  # before the target loads: a resumed campaign's --config is its own
    check_arguments(args)  # every flag before the target's probe and before any folder
    return run(args, _target(args))


def shrink_command(args: argparse.Namespace) -> int:
    from racefuzz.cli.shrink_command import shrink_command as shrink

    return shrink(args, _target(args))


def report_command(args: argparse.Namespace) -> int:
    from racefuzz.cli.shrink_command import report_command as report

    return report(args)


def setup_command(args: argparse.Namespace) -> int:
    """Fetch a real-EP target's EP and driver into the cache, then load it as a run would."""
    from racefuzz.targets import cpu_eps

    cpu_eps.setup(args.name, lambda line: print(line, flush=True))
    target = load_target(args.name, None)
    print(f"racefuzz setup: target '{target.name}' is ready: {target.description}")
    print(f"racefuzz setup: next, `racefuzz doctor --target {target.name}`")
    return 0


def dispatch(args: argparse.Namespace) -> int:
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "replay": replay_command,
        "doctor": doctor_command,
        "run": run_command,
        "shrink": shrink_command,
        "report": report_command,
        "setup": setup_command,
    }
    return handlers[args.command](args)
