"""From a failing schedule to a ticket bundle: `racefuzz shrink`, `racefuzz report`, and the
one function campaigns call on each new signature.

`shrink_to_bundle` is the only place that wires the shrinker to the executor and hands its
result to the report writer, so the command and the campaign produce the same bundles.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from racefuzz.cli.out_folder import check_writable
from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.execute.executor import Launcher
from racefuzz.execute.fleet_slot import FleetSlot
from racefuzz.execute.runner import Runner
from racefuzz.judge.identity import OVERLAP, ClusterKey
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.report import bundle
from racefuzz.report import markdown as report
from racefuzz.report.console import timeline
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Schedule
from racefuzz.shrink import best as shrink_best
from racefuzz.shrink import result as shrink_result
from racefuzz.shrink import shrinker as shrink
from racefuzz.shrink.result import ShrinkEvent, ShrinkResult
from racefuzz.targets.model import Target


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="a failing schedule .json")
    p.add_argument("--signature", default=None, help="which finding to keep (default: first)")
    p.add_argument("--replays", type=int, default=3, help="runs per candidate (n)")
    p.add_argument("--need", type=int, default=1, help="failing runs that make it fail (k)")
    p.add_argument(
        "--budget",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds the shrink may take, its replays included (300)",
    )
    p.add_argument("--out", type=Path, default=Path("reports"), help="where the bundle goes")


def shrink_stats(original: Schedule, result: ShrinkResult) -> dict[str, Any]:
    return {
        "steps": [len(original.steps), len(result.final.steps)],
        "threads": [original.threads, result.final.threads],
        "seconds": round(result.seconds, 1),
        "candidates": result.candidates,
        "calls": result.calls,
        "one_minimal": result.one_minimal,
        # How often the original failed, and the replays that rate gave each candidate.
        "original_failed": "{} of {} runs".format(*result.measured),
        "check": "{} of {} runs".format(*result.check),
        "budget_s": round(result.budget_s, 1),
        "stopped": result.stopped,
        "passes": {p.name: {"calls": p.calls, "shrinks": p.shrinks} for p in result.passes},
    }


def shrink_to_bundle(
    runner: Runner,
    spec: str,
    schedule: Schedule,
    finding: Finding,
    failing: RunResult,
    root: Path,
    *,
    budget_s: float,
    stretch_budget: bool = False,
    budget_cap_s: float = shrink_result.MAX_BUDGET_S,
    replays: int = 3,
    need: int = 1,
    launcher: Launcher | None = None,
    best_path: Path | None = None,
    on_progress: Callable[[ShrinkEvent], None] | None = None,
    found: Schedule | None = None,
    parallel: int = 1,
    between: Callable[[], float] | None = None,
) -> tuple[ShrinkResult, Path]:
    """Shrink `schedule` and write its bundle; the bundle's original is `found` when given (a
    resumed shrink starts from the best schedule of the one cut short, not from the finding)."""

    target = runner.target
    # Replays at once cannot share one slot's zygote: each then starts its own worker. A
    # persistent worker's failures are each confirmed in a fresh one (`Runner.strict`).
    # On a fleet, replays run on nodes of the device kind that failed, parallel ones spread
    # over that kind's slots.
    if runner.fleet is not None:
        launcher = FleetSlot(runner.fleet, failing.device or None)
    run = replace(runner, strict=True).through(
        launcher if parallel == 1 or runner.fleet is not None else None
    )

    # A shrink resumed from its best schedule asks for what that schedule was shrunk to show.
    signature = shrink_best.resumed_signature(best_path, schedule) or finding.cluster
    result = shrink.shrink(
        schedule,
        signature,
        run,
        replays=replays,
        need=need,
        budget_s=budget_s,
        stretch_budget=stretch_budget,
        budget_cap_s=budget_cap_s,
        models_by_size=target.models,
        library_of=target.library_of,
        on_progress=on_progress,
        best_path=best_path,
        parallel=parallel,
        # Under overlap clustering the replays must fail as this finding did, not merely after
        # an overlap: another cluster's failure is that cluster's evidence.
        symptom=finding.symptom if finding.overlap else None,
        between=between,
    )
    # A shrink that blamed an earlier overlap group (`shrink._blame_earlier`) made a schedule of
    # that group's race: the bundle and its repro.py judge replays by that group's shape.
    shown = finding
    if finding.overlap and result.signature != finding.cluster:
        key = ClusterKey.parse(result.signature)
        shown = replace(finding, overlap=key.op if key.kind == OVERLAP else finding.overlap)
    folder = bundle.write_bundle(
        root,
        shown,
        schedule if found is None else found,
        result.final,
        result.last_failure or failing,
        target,
        spec,
        result.reproduction,
        shrink_stats(schedule, result),
        limits=runner.options,
        node_env=_node_env(runner, result.last_failure or failing),
    )
    return result, folder


def _node_env(runner: Runner, failing: RunResult) -> dict[str, Any] | None:
    """The env.json facts of the fleet node the failure ran on (None: this machine's)."""
    if runner.fleet is None or not failing.node:
        return None
    return runner.fleet.node_env(failing.node)


def _pick(result: RunResult, signature: str | None) -> Finding:
    for f in result.findings:
        if signature is None or f.signature == signature or signature in f.signature:
            return f
    raise RacefuzzError("the schedule did not fail in 5 runs: nothing to shrink")


def shrink_command(args: argparse.Namespace, target: Target) -> int:
    if args.replays < 1 or not 1 <= args.need <= args.replays or args.budget <= 0:
        raise RacefuzzError("need 1 <= --need <= --replays and a positive --budget")
    original = load(args.path)
    check_writable("--out", args.out)
    if target.missing(original):
        raise RacefuzzError(
            f"{args.path}: target '{target.name}' has no {target.missing(original)[0]}"
        )
    runner = Runner(target, executor.RunOptions(step_timeout=args.step_timeout, seed=args.seed))
    out = Console()
    failing = None
    for _ in range(5):  # a flaky failure may need a few tries to show at all
        failing = runner.run(original)
        if failing.findings and (
            args.signature is None or any(args.signature in f.signature for f in failing.findings)
        ):
            break
    assert failing is not None
    finding = _pick(failing, args.signature)
    out.print(f"shrinking [red]{finding.kind}[/] on {finding.op}: {finding.message}")
    best = args.out / f".{args.path.stem}.best.json"
    args.out.mkdir(parents=True, exist_ok=True)

    def progress(ev: ShrinkEvent) -> None:
        if ev.improved or ev.candidates % 10 == 0:
            out.print(
                f"  {ev.phase:<14} {ev.steps:>3} steps {ev.threads} thread(s), "
                f"{ev.candidates} candidates, {ev.calls} runs",
                highlight=False,
            )

    launcher = runner.launcher()  # same runs, about 2x faster where it forks
    try:
        result, bundle = shrink_to_bundle(
            runner,
            args.target,
            original,
            finding,
            failing,
            args.out,
            budget_s=args.budget,
            replays=args.replays,
            need=args.need,
            launcher=launcher,
            best_path=best,
            on_progress=progress,
        )
    finally:
        if launcher is not None:
            launcher.close()
    best.unlink(missing_ok=True)
    shrink_best.signature_path(best).unlink(missing_ok=True)
    out.print(timeline(result.final))
    k, n = result.reproduction
    minimal = "1-minimal" if result.one_minimal else "not shown 1-minimal"
    verdict = "shrunk" if result.confirmed else "NOT REPRODUCED"
    out.print(
        f"{verdict}: {len(original.steps)} -> {len(result.final.steps)} steps ({minimal}), "
        f"reproduced {k}/{n}, {result.seconds:.1f} s; bundle: {bundle}"
    )
    return 1 if result.confirmed else 0


def report_command(args: argparse.Namespace) -> int:
    folder: Path = args.path
    if not (folder / "finding.json").is_file():
        raise RacefuzzError(f"'{folder}' is not a report bundle (no finding.json)")
    text = report.render(folder)
    (folder / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0
