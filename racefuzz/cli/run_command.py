"""`racefuzz run`: the campaign a user points at an EP and leaves for some minutes.

Wires the pieces together: target and corpus in, `Campaign` plus dashboard under one trio
nursery, results written at the end whatever ended it (deadline or Ctrl-C), exit 1 when
anything was found. Shrinking and ticket bundles hook in through `shrink_hook`.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from racefuzz import strategies
from racefuzz.campaign import dashboard, known_issues, results
from racefuzz.campaign import store as campaign_store
from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.disk_reserve import Reserve
from racefuzz.campaign.loop import Campaign
from racefuzz.campaign.state import FindingRecord
from racefuzz.cli import fleet_start, preflight_finding, resume_options
from racefuzz.cli.out_folder import check_writable
from racefuzz.cli.shrink_hook import make_shrink_hook
from racefuzz.errors import BUG_EXIT, RacefuzzError, report_internal
from racefuzz.execute import executor
from racefuzz.execute.runner import Runner
from racefuzz.judge.baseline import Baselines
from racefuzz.report.bundle import create_folder
from racefuzz.schedule import contract
from racefuzz.schedule.json_io import load_many
from racefuzz.schedule.model import Schedule
from racefuzz.shrink import result as shrink_result
from racefuzz.targets import testbed
from racefuzz.targets.model import Target

if TYPE_CHECKING:
    from racefuzz.fleet.pool import RayFleet

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "schedules"


def add_arguments(p: argparse.ArgumentParser) -> None:
    # The options a resume keeps default to None: given or not is told apart, and
    # `resume_options.settle` fills in the campaign's value or the default.
    p.set_defaults(step_timeout=None, seed=None)
    p.add_argument("--seconds", type=float, default=None, help="how long to fuzz (60)")
    p.add_argument("--jobs", type=int, default=None, help="workers in parallel (one a core)")
    p.add_argument("--strategy", default=None, help="portfolio, random, pct, swarm or mutate")
    p.add_argument("--corpus", type=Path, default=None, help="seed schedules (default schedules/)")
    p.add_argument("--no-corpus", action="store_true", help="start from nothing")
    p.add_argument("--out", type=Path, default=Path("reports"), help="where results go")
    p.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="continue a campaign folder, with its options but those given again",
    )
    p.add_argument("--junit", type=Path, default=None, help="also write JUnit XML here")
    p.add_argument("--no-dashboard", action="store_true", help="plain log lines")
    p.add_argument(
        "--shrink",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="shrink each new cluster to a ticket bundle (default; --no-shrink: keep as found)",
    )
    p.add_argument(
        "--shrink-only",
        action="store_true",
        help="with --resume: no fuzzing, finish the shrinks the campaign left, on every job",
    )
    p.add_argument(
        "--shrink-parallel",
        type=int,
        default=None,
        metavar="N",
        help="a shrink's replays N at a time: a GPU race may need the load (workers: jobs x N)",
    )
    p.add_argument(
        "--shrink-budget",
        type=float,
        default=None,
        metavar="S",
        help="seconds per shrink, replays included (default: scaled to the cost of a run)",
    )
    p.add_argument("--max-steps", type=int, default=None, help="most steps in a schedule (24)")
    p.add_argument("--max-rss-mb", type=float, default=None, help="worker memory ceiling (4096)")
    p.add_argument(
        "--lifecycle",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="unregister and re-register mid-schedule (default; --no-lifecycle: never)",
    )
    p.add_argument(
        "--allow-misuse",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also generate schedules outside ORT's API contract (findings labelled misuse)",
    )
    p.add_argument(
        "--known", type=Path, default=None, help="known-issues file: its clusters do not fail"
    )
    p.add_argument(
        "--write-known",
        type=Path,
        default=None,
        metavar="FILE",
        help="add this campaign's clusters to a known-issues file",
    )
    p.add_argument(
        "--spawn",
        dest="zygote",
        action="store_false",
        default=None,
        help="start each worker fresh (no zygote fork fast path)",
    )
    p.add_argument(
        "--zygote", action="store_true", default=None, help="fork workers (default; undoes --spawn)"
    )
    p.add_argument(
        "--persistent",
        action="store_true",
        default=None,
        help="one worker process per slot serves schedules while they end whole, about 3x "
        "faster; findings are confirmed in fresh workers (always on for TSan targets)",
    )
    p.add_argument(
        "--no-persistent", dest="persistent", action="store_false", help="undoes --persistent"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="run schedules on a Ray cluster's nodes (default address: auto); --jobs is then "
        "slots per node (default: its CPUs, or GPUs for a GPU target); needs racefuzz[ray]",
    )


def _corpus(args: argparse.Namespace, target: Target) -> list[Schedule]:
    if args.no_corpus:
        return []
    folder = args.corpus or DEFAULT_CORPUS
    if args.corpus is None and not folder.is_dir():
        return []  # an installed racefuzz without the source tree's schedules/
    found = [s for _, s in load_many(folder) if target.applies(s)]
    if args.allow_misuse:
        return found
    # Outside ORT's contract: not run unless asked for, like generated ones.
    return [s for s in found if contract.is_legal(s, target.library_of)]


def _campaign_dir(args: argparse.Namespace, target: Target) -> Path:
    if args.resume is not None:
        if not args.resume.is_dir():
            raise RacefuzzError(f"cannot resume '{args.resume}': no such campaign folder")
        resumed: Path = args.resume
        return resumed
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    name = target.name.replace(":", "-").replace(",", "-")
    try:
        return create_folder(args.out, f"{stamp}-{name}")
    except OSError as e:
        raise RacefuzzError(
            f"cannot write results under --out '{args.out}': {e.strerror}"
        ) from None


def check_arguments(args: argparse.Namespace) -> None:
    """Every bad value is one line before anything runs, never a traceback mid-campaign."""
    for flag, value in (
        ("--seconds", args.seconds),
        ("--step-timeout", args.step_timeout),
        ("--max-rss-mb", args.max_rss_mb),
        ("--shrink-budget", args.shrink_budget),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise RacefuzzError(f"{flag} must be a positive number, not {value}")
    if args.shrink_only and (args.resume is None or not args.shrink):
        raise RacefuzzError("--shrink-only finishes a campaign's shrinks: it needs --resume DIR")
    if args.jobs < 1 or args.max_steps < 1 or args.shrink_parallel < 1:
        raise RacefuzzError("--jobs, --max-steps and --shrink-parallel must be at least 1")
    cores = os.cpu_count() or 1
    if args.jobs > 4 * cores and args.ray is None:  # a fleet's slots are its nodes' cores
        print(
            f"racefuzz: warning: --jobs {args.jobs} on {cores} cores: workers will starve each "
            "other, and step timeouts may then be hangs of racefuzz's own making",
            file=sys.stderr,
        )
    if args.strategy not in strategies.names():
        known = ", ".join(strategies.names())
        raise RacefuzzError(f"unknown strategy '{args.strategy}' (known: {known})")
    if args.junit is not None:
        folder = args.junit.parent
        if args.junit.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            raise RacefuzzError(f"cannot write --junit '{args.junit}': not a writable file path")
    if args.resume is None:
        check_writable("--out", args.out)


def _fixed_testbed_residual(
    args: argparse.Namespace, target: Target, failing: list[FindingRecord]
) -> str:
    """On the plain testbed (command 1 of the README), new clusters that are all its filed
    residual R1 are expected: say so, and how to leave them out."""
    if target.name != "testbed" or not failing or args.known is not None:
        return ""
    if not testbed.KNOWN_ISSUES.is_file():
        return ""  # an installed racefuzz without the source tree
    filed = known_issues.load(testbed.KNOWN_ISSUES, target.name)
    if not all(r.finding.cluster in filed for r in failing):
        return ""
    return (
        f"the {len(failing)} new cluster(s) are the fixed testbed's residual R1, expected "
        f"(testbed/README.md); --known {testbed.KNOWN_ISSUES} leaves them out"
    )


def _is_interrupt(error: BaseException) -> bool:
    """Ctrl-C, possibly wrapped in trio's exception groups."""
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(KeyboardInterrupt)
        return rest is None
    return isinstance(error, KeyboardInterrupt)


def run_command(args: argparse.Namespace, target: Target) -> int:
    target = resume_options.finish(args, target)  # says what the command line overrode
    known_issues_found = resume_options.known_clusters(args, target)
    corpus = _corpus(args, target)
    options = executor.RunOptions(
        step_timeout=args.step_timeout, max_rss_mb=args.max_rss_mb, seed=args.seed
    )
    fleet = None if args.ray is None else fleet_start.start(args, target, options)
    try:
        return _run(args, target, known_issues_found, corpus, options, fleet)
    finally:
        if fleet is not None:
            fleet.shutdown()  # every actor stopped, and with them their workers


def _run(
    args: argparse.Namespace,
    target: Target,
    known_issues_found: frozenset[str],
    corpus: list[Schedule],
    options: executor.RunOptions,
    fleet: RayFleet | None,
) -> int:
    folder = _campaign_dir(args, target)
    try:
        reserve = Reserve(folder)
    except RacefuzzError:
        if args.resume is None:
            shutil.rmtree(folder, ignore_errors=True)  # no empty folder after a failed start
        raise
    restored: list[FindingRecord] = []
    if args.resume is not None:
        restored = campaign_store.restore(folder)
        corpus += campaign_store.corpus(folder)
    # Every run of this command.
    runner = Runner(
        target,
        options,
        zygote=args.zygote,
        persistent=args.persistent,
        unconfirmed_dir=folder / "unconfirmed",
        fleet=fleet,
    )
    config = CampaignConfig(
        seconds=args.seconds,
        jobs=args.jobs if fleet is None else fleet.slots,
        seed=args.seed,
        strategy=args.strategy,
        corpus=tuple(corpus),
        step_timeout=args.step_timeout,
        max_rss_mb=args.max_rss_mb,
        shrink=args.shrink,
        max_steps=args.max_steps,
        zygote=args.zygote,
        lifecycle=args.lifecycle,
        allow_misuse=args.allow_misuse,
        known_issues=known_issues_found,
        fuzz=not args.shrink_only,
    )

    baselines = Baselines(target, runner.run)
    campaign = Campaign(target, config, folder, baselines, None, restored, runner=runner)
    if args.resume is not None:
        campaign.state.earlier = campaign_store.totals(folder)
    campaign.reserve = reserve
    if fleet is not None:
        fleet.say = campaign.note  # nodes lost or joined, in the campaign's log from now on
    campaign.shrink_hook = make_shrink_hook(
        runner,
        args.target,
        args.shrink_budget,
        folder,
        campaign.note,
        args.shrink_parallel,
        # --shrink-only has no fuzzing to share the time with: its shrinks take what they need.
        shrink_result.MAX_BUDGET_S
        if args.shrink_only
        else shrink_result.campaign_cap(args.seconds),
    )
    header = resume_options.header_fields(args, target, known_issues_found)
    live = not args.no_dashboard and dashboard.is_terminal()
    campaign.persist = lambda: results.write_all(campaign.state, folder, header, None)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dashboard.show, campaign.state, f"racefuzz {args.target}", live)
            await campaign.run()
            nursery.cancel_scope.cancel()

    def stop(signum: int, frame: object) -> None:
        # Ctrl-C and SIGTERM (what CI timeouts send) stop the campaign the way its deadline
        # does, wherever they land; a second Ctrl-C is the impatient user's: raise at once.
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if campaign.state.interrupted and signum == signal.SIGINT:
            raise KeyboardInterrupt
        campaign.request_stop(name)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:  # from here on, whatever ends the campaign, the summary is written
        print(f"racefuzz: campaign {folder} ({len(corpus)} corpus schedules)", flush=True)
        if fleet is None:  # a fleet's nodes probed the target themselves
            preflight_finding.record(campaign, runner)  # a probe that crashed: a finding
        trio.run(main)
    except BaseException as e:
        if not _is_interrupt(e):
            raise
        campaign.state.interrupted = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reserve.release()  # its room is the summary's, on a disk the campaign filled
        try:
            results.write_all(campaign.state, folder, header, args.junit)
            listed = {r.bundle.name for r in campaign.state.findings.values() if r.bundle}
            # As consistent as a resume would leave it: a task still writing when the end's
            # wait for it ran out leaves a temporary bundle or a claimed, empty name.
            campaign_store.tidy(folder)
            campaign_store.drop_unlisted(folder, listed)
        except OSError as e:
            campaign.write_error = campaign.write_error or str(e.strerror)
            written = False
        else:
            written = True
    state = campaign.state
    if campaign.write_error:
        where = f"what it found is in {folder / 'summary.md'}" if written else "no summary"
        raise RacefuzzError(
            f"cannot write under '{folder}': {campaign.write_error}; the campaign stopped after "
            f"{state.elapsed():.0f} s with {len(state.findings)} cluster(s), {where}"
        )
    if args.write_known is not None:
        added = known_issues.write(
            args.write_known, target.name, [r.finding for r in state.findings.values()]
        )
        print(f"racefuzz: {added} cluster(s) added to {args.write_known}", flush=True)
    print(
        f"racefuzz: {state.schedules} schedules in {state.elapsed():.0f} s, "
        f"clusters: {state.counts()}; summary: {folder / 'summary.md'}",
        flush=True,
    )
    if state.lost:
        print(
            f"racefuzz: {state.lost} run(s) lost with Ray nodes (run again elsewhere)", flush=True
        )
    for hint in (
        results.shrink_hint(list(state.findings.values()), folder),
        results.unconfirmed_hint(folder),
    ):
        if hint:
            print(f"racefuzz: {hint.replace('`', '')}", flush=True)
    residual = _fixed_testbed_residual(args, target, state.failing())
    if residual:
        print(f"racefuzz: {residual}", flush=True)
    if state.internal_errors:
        for text in state.internal_errors:
            report_internal(text)
        return BUG_EXIT
    return 1 if state.failing() else 0
