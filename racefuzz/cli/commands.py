"""The bodies of the subcommands: each takes parsed arguments and returns an exit code.

Kept apart from `cli` so that argument parsing stays import-light and so that each command
reads top to bottom: load the target, do the work, render, decide the code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.execute.replay import replay
from racefuzz.execute.runner import Runner
from racefuzz.judge.baseline import Baselines
from racefuzz.judge.outcome import RunResult
from racefuzz.report import console as render
from racefuzz.schedule.json_io import load_many
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.schedule.op_table import SPECS
from racefuzz.targets import preflight
from racefuzz.targets.model import Profile, Target, describe
from racefuzz.targets.registry import load_target
from racefuzz.worker.protocol import Skip

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
    target = load_target(args.target, args.config)
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


def _cell(result: RunResult, step: int) -> str:
    o = result.outcome(step)
    if o is None:
        return f"[red]{result.exit} ({result.signal or result.returncode})[/]"
    if not o.ok:
        return f"[red]error[/]: {o.message[-90:]}"
    if o.skipped == Skip.MISSING:
        return "[yellow]skipped[/] (an earlier step failed)"
    if o.skipped:  # the EP, the profile or this machine lacks what the op needs
        return f"[yellow]skipped[/] ({o.detail})"
    if o.check is not None and o.check != "ok":
        return f"[red]{o.check}[/]"
    return "[green]ok[/]"


def _placement_cell(
    probe: dict[str, Any], profile: Profile, model: str, counts: tuple[int, int] | None
) -> str:
    """e.g. "3/3", or "0/3 (CPUExecutionProvider 3)": where ORT put the model's nodes."""
    cell = dict(probe.get("placement") or {}).get(profile.name, {}).get(model)
    if cell is None:
        return "-"  # one of ORT's own EPs
    if counts is None:
        return "[red]no session[/]"
    mine, total = counts
    if mine == total:
        return f"[green]{mine}/{total}[/]"
    eps: dict[str, list[str]] = cell["eps"]
    elsewhere = ", ".join(f"{ep} {len(n)}" for ep, n in eps.items() if ep != profile.ep_name)
    colour = "red" if mine == 0 else "yellow"
    return f"[{colour}]{mine}/{total}[/] ({elsewhere})"


def doctor_command(args: argparse.Namespace) -> int:
    version = check_ort()
    args.target = _target_spec(args)
    target = load_target(args.target, args.config)
    runner = _runner(args, target)
    out = Console()
    out.print(f"onnxruntime {version}, python {sys.version.split()[0]}, cache {cache_root()}")
    out.print(describe(target))
    probe = preflight.probe(target)
    if "error" in probe:
        out.print(f"[red]{probe['error']}[/]")
        return 1
    for name, state in dict(probe.get("libraries", {})).items():
        out.print(f"library {name}: {state}")
    devices = Table(title="EP devices after registration")
    for col in ("ep", "vendor", "device", "vendor id", "memory (default, host-accessible)"):
        devices.add_column(col)
    for d in probe.get("devices", []):
        mem = ", ".join(str(m) for m in d["memory"])
        devices.add_row(d["ep_name"], d["ep_vendor"], d["device_type"], hex(d["vendor_id"]), mem)
    out.print(devices)
    checks = Table(title="each profile and model alone, on the main thread")
    checked = [op for op, spec in SPECS.items() if spec.doctor]  # create first: it makes s1
    for col in ("profile", "model", "nodes on its EP", *checked):
        checks.add_column(col)
    placed = preflight.on_ep(target, probe)
    problems = 0
    for profile in target.profiles:
        for model in target.models:
            steps = (
                Step(0, Op.REGISTER),
                *(
                    make_step(op, 0, session="s1", profile=profile.name, model=model)
                    for op in checked
                ),
            )
            result = runner.run(Schedule(1, steps, "doctor"))
            problems += bool(result.findings)
            where = _placement_cell(probe, profile, model, placed.get((profile.name, model)))
            checks.add_row(
                profile.name, model, where, *(_cell(result, i) for i in range(1, len(steps)))
            )
    out.print(checks)
    for line in preflight.placement_warnings(target, probe):
        out.print(f"[yellow]warning: {line}[/]")
    problems += len(preflight.problems(target, probe))
    if problems:
        out.print(
            f"[yellow]{problems} profile/model pair(s) fail alone: campaigns skip what a target "
            "cannot run at all; replay reports such failures as 'fails alone too'.[/]"
        )
    return 1 if problems else 0


def run_command(args: argparse.Namespace) -> int:
    from racefuzz.cli.resume_options import settle
    from racefuzz.cli.run_command import run_command as run

    settle(args)  # before the target loads: a resumed campaign's --config is its own
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
