"""`racefuzz run`: the campaign a user points at an EP and leaves for some minutes.

Wires the pieces together: target and corpus in, `Campaign` plus dashboard under one trio
nursery, results written at the end whatever ended it (deadline or Ctrl-C), exit 1 when
anything was found. Shrinking and ticket bundles hook in through `shrink_hook`.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import trio

from racefuzz import dashboard, executor, results
from racefuzz.baseline import Baselines
from racefuzz.campaign import Campaign, CampaignConfig, FindingRecord, ShrinkHook
from racefuzz.errors import RacefuzzError
from racefuzz.executor import Launcher
from racefuzz.outcome import RunResult
from racefuzz.report import create_folder
from racefuzz.schedule import Schedule, load_many
from racefuzz.shrink_command import shrink_to_bundle
from racefuzz.target import Target
from racefuzz.zygote_pool import LauncherClosed

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "schedules"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers in parallel")
    p.add_argument(
        "--strategy", default="portfolio", help="portfolio, random, pct, swarm or mutate"
    )
    p.add_argument("--corpus", type=Path, default=None, help="seed schedules (default schedules/)")
    p.add_argument("--no-corpus", action="store_true", help="start from nothing")
    p.add_argument("--out", type=Path, default=Path("reports"), help="where results go")
    p.add_argument("--resume", type=Path, default=None, help="continue a campaign folder")
    p.add_argument("--junit", type=Path, default=None, help="also write JUnit XML here")
    p.add_argument("--no-dashboard", action="store_true", help="plain log lines")
    p.add_argument("--no-shrink", action="store_true", help="keep found schedules as found")
    p.add_argument("--shrink-budget", type=float, default=60.0, metavar="S")
    p.add_argument("--max-steps", type=int, default=24)
    p.add_argument("--max-rss-mb", type=float, default=4096.0, help="worker memory ceiling")
    p.add_argument("--no-lifecycle", action="store_true", help="never unregister mid-schedule")
    p.add_argument(
        "--spawn", action="store_true", help="start each worker fresh (no zygote fork fast path)"
    )


def _corpus(args: argparse.Namespace, target: Target) -> list[Schedule]:
    if args.no_corpus:
        return []
    folder = args.corpus or DEFAULT_CORPUS
    if args.corpus is None and not folder.is_dir():
        return []  # an installed racefuzz without the source tree's schedules/
    return [s for _, s in load_many(folder) if target.applies(s)]


def _campaign_dir(args: argparse.Namespace, target: Target) -> Path:
    if args.resume is not None:
        if not args.resume.is_dir():
            raise RacefuzzError(f"cannot resume '{args.resume}': no such campaign folder")
        resumed: Path = args.resume
        return resumed
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    name = target.name.replace(":", "-").replace(",", "-")
    return create_folder(args.out, f"{stamp}-{name}")


def make_shrink_hook(
    target: Target, spec: str, options: executor.RunOptions, budget: float, root: Path
) -> ShrinkHook:
    def hook(
        record: FindingRecord, schedule: Schedule, failing: RunResult, launcher: Launcher | None
    ) -> None:
        try:
            result, bundle = shrink_to_bundle(
                target,
                spec,
                schedule,
                record.finding,
                failing,
                root,
                options=options,
                budget_s=budget,
                launcher=launcher,
                best_path=record.original.with_suffix(".min.json"),
            )
        except LauncherClosed:
            record.state = "not shrunk (time is up)"
            return
        except Exception as e:  # a shrink bug must not lose the finding: it is on disk
            record.state = f"shrink-failed: {type(e).__name__}: {e}"[:80]
            return
        record.minimal_steps = len(result.final.steps)
        record.bundle = bundle
        record.state = "shrunk"

    return hook


def _is_interrupt(error: BaseException) -> bool:
    """Ctrl-C, possibly wrapped in trio's exception groups."""
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(KeyboardInterrupt)
        return rest is None
    return isinstance(error, KeyboardInterrupt)


def run_command(args: argparse.Namespace, target: Target) -> int:
    if args.seconds <= 0 or args.jobs < 1:
        raise RacefuzzError("--seconds must be positive and --jobs at least 1")
    folder = _campaign_dir(args, target)
    known: list[str] = []
    corpus = _corpus(args, target)
    if args.resume is not None:
        known, earlier = results.load_known(folder)
        corpus += earlier
    options = executor.RunOptions(step_timeout=args.step_timeout, max_rss_mb=args.max_rss_mb)
    config = CampaignConfig(
        seconds=args.seconds,
        jobs=args.jobs,
        seed=args.seed,
        strategy=args.strategy,
        corpus=tuple(corpus),
        step_timeout=args.step_timeout,
        max_rss_mb=args.max_rss_mb,
        shrink=not args.no_shrink,
        shrink_budget_s=args.shrink_budget,
        max_steps=args.max_steps,
        zygote=not args.spawn,
        lifecycle=not args.no_lifecycle,
    )

    def run_one(s: Schedule) -> RunResult:
        return executor.run(target, s, options)

    baselines = Baselines(target, run_one)
    hook = make_shrink_hook(target, args.target, options, args.shrink_budget, folder)
    campaign = Campaign(target, config, folder, baselines, hook, known)
    header: dict[str, Any] = {
        "target": target.name,
        "target_spec": args.target,
        "seed": args.seed,
        "jobs": args.jobs,
        "seconds": args.seconds,
        "strategy": args.strategy,
    }
    live = not args.no_dashboard and dashboard.is_terminal()
    print(f"racefuzz: campaign {folder} ({len(corpus)} corpus schedules)", flush=True)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dashboard.show, campaign.state, f"racefuzz {args.target}", live)
            await campaign.run()
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseException as e:
        if not _is_interrupt(e):
            raise
        campaign.state.interrupted = True
    finally:
        results.write_all(campaign.state, folder, header, args.junit)
    state = campaign.state
    print(
        f"racefuzz: {state.schedules} schedules in {state.elapsed():.0f} s, "
        f"{len(state.findings)} finding(s); summary: {folder / 'summary.md'}",
        flush=True,
    )
    return 1 if state.findings else 0
