"""The live view of a campaign (rich), or plain log lines when stdout is not a terminal.

It only reads `CampaignState`; it never drives the campaign. Refreshed by its own trio task.
"""

from __future__ import annotations

import sys

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from racefuzz.campaign.state import CampaignState
from racefuzz.report.console import ORIGIN_LABEL


def render(state: CampaignState, title: str) -> Group:
    elapsed = state.elapsed()
    head = Table.grid(padding=(0, 3))
    head.add_row(
        f"elapsed [bold]{elapsed:.0f}s[/] / {state.seconds:.0f}s",
        f"remaining [bold]{max(0.0, state.seconds - elapsed):.0f}s[/]",
        f"schedules [bold]{state.schedules}[/] ({state.rate():.2f}/s)",
        f"clusters [bold red]{state.counts()}[/]",
    )
    head.add_row(
        f"jobs {state.busy}/{state.jobs} busy",
        f"worker crashes {state.crashes}, hangs {state.hangs}",
        f"worker peak {state.worker_rss_mb:.0f} MB",
        f"racefuzz {state.campaign_rss_mb:.0f} MB",
    )
    found = Table(title="finding clusters", expand=True)
    for col in ("verdict", "kind", "op", "message", "runs", "variants", "first", "origin", "state"):
        found.add_column(col, overflow="fold")
    colour = {"new": "bold red", "known": "yellow", "misuse": "magenta", "duplicate": "dim"}
    for rec in sorted(state.findings.values(), key=lambda r: r.first_seen_s):
        f = rec.finding
        found.add_row(
            f"[{colour[rec.verdict]}]{rec.verdict}[/]",
            f.kind,
            f.op,
            f.message[:70],
            str(rec.count),
            str(rec.signature_count),
            f"{rec.first_seen_s:.1f}s",
            ORIGIN_LABEL.get(f.origin, f.origin),
            rec.state if rec.minimal_steps is None else f"{rec.state} ({rec.minimal_steps} steps)",
        )
    yields = Table(title="yield per strategy")
    for col in ("strategy", "schedules", "new clusters"):
        yields.add_column(col)
    for name, c in sorted(state.by_strategy.items()):
        yields.add_row(name, str(c["schedules"]), str(c["new"]))
    log = "\n".join(state.log) or "(no events yet)"
    return Group(Panel(head, title=title), found, yields, Panel(log, title="events"))


async def show(state: CampaignState, title: str, live: bool) -> None:
    """Until cancelled: redraw the dashboard, or print new log lines."""
    if live:
        with Live(render(state, title), console=Console(), refresh_per_second=4) as view:
            while True:
                await trio.sleep(0.25)
                view.update(render(state, title))
    printed = 0  # how many log lines, ever, have been printed
    last_status = 0.0
    while True:
        fresh = min(state.log_total - printed, len(state.log))
        for line in list(state.log)[len(state.log) - fresh :] if fresh > 0 else []:
            print(line, flush=True)
        printed = state.log_total
        if state.elapsed() - last_status >= 10:
            last_status = state.elapsed()
            print(
                f"[{last_status:6.1f}s] {state.schedules} schedules ({state.rate():.2f}/s), "
                f"clusters: {state.counts()}, {state.crashes} crashes, {state.hangs} hangs",
                flush=True,
            )
        await trio.sleep(0.5)


def is_terminal() -> bool:
    return sys.stdout.isatty()
