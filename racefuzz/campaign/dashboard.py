"""The live view of a campaign (rich), or plain log lines when stdout is not a terminal.

It only reads `CampaignState`; it never drives the campaign. Refreshed by its own trio task.

The view is cut to the terminal before rich sees it: rich's `Live` crops whatever is taller than
the screen from the bottom, which hid the newest events under a long cluster table, and a table
wider than the screen wraps its cells letter by letter. So the events panel always gets its
rows, the cluster table shows the newest clusters that fit (the rest are in summary.md), and
columns are dropped, least useful first, until the rest fit the width.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from racefuzz.campaign.state import CampaignState, FindingRecord
from racefuzz.report.console import ORIGIN_LABEL

EVENT_ROWS = 6  # the newest events always shown (fewer only on a tiny terminal)
PANEL_CHROME = 2  # a panel's top and bottom border
TABLE_CHROME = 5  # a table's title, top border, header, header rule, bottom border
HEAD_ROWS = 2 + PANEL_CHROME
COLOUR = {"new": "bold red", "known": "yellow", "misuse": "magenta", "duplicate": "dim"}


@dataclass(frozen=True)
class Column:
    name: str
    width: int  # the most it needs; `message` takes what is left
    keep: int  # lower is dropped first when the terminal is narrow


# Left to right as shown; verdict, kind, op, message and state are kept at any width.
COLUMNS = (
    Column("verdict", 9, 9),
    Column("kind", 12, 8),
    Column("op", 16, 7),
    Column("message", 0, 10),
    Column("runs", 6, 3),
    Column("variants", 8, 1),
    Column("first", 7, 2),
    Column("origin", 15, 4),
    Column("state", 24, 6),
)
MESSAGE_MIN = 16


def columns_for(width: int) -> list[Column]:
    """The columns that fit `width`, dropping the least useful first; `message` gets the rest."""
    shown = list(COLUMNS)
    droppable = sorted((c for c in COLUMNS if c.keep < 6), key=lambda c: c.keep)

    def needed(cols: list[Column]) -> int:  # each column has a space either side and a rule
        return sum(c.width + 3 for c in cols) + 1 + MESSAGE_MIN

    for col in droppable:
        if needed(shown) <= width:
            break
        shown.remove(col)
    return shown


def _cells(rec: FindingRecord) -> dict[str, str]:
    f = rec.finding
    state = rec.state if rec.minimal_steps is None else f"{rec.state} ({rec.minimal_steps} steps)"
    return {
        "verdict": f"[{COLOUR[rec.verdict]}]{rec.verdict}[/]",
        "kind": f.kind,
        "op": f.op,
        "message": f.message,
        "runs": str(rec.count),
        "variants": str(rec.signature_count),
        "first": f"{rec.first_seen_s:.1f}s",
        "origin": ORIGIN_LABEL.get(f.origin, f.origin),
        "state": state,
    }


def _clusters(state: CampaignState, width: int, rows: int) -> Table:
    """The newest clusters that fit `rows` table rows, one line each."""
    records = sorted(state.findings.values(), key=lambda r: r.first_seen_s)
    hidden = 0
    if len(records) > rows:
        hidden = len(records) - max(rows - 1, 0)
        records = records[hidden:] if rows > 1 else []
    title = "finding clusters" + (f" ({hidden} earlier in summary.md)" if hidden else "")
    table = Table(title=title, expand=True)
    cols = columns_for(width)
    for col in cols:
        grows = col.name == "message"
        table.add_column(
            col.name,
            no_wrap=True,
            overflow="ellipsis",
            ratio=1 if grows else None,
            max_width=None if grows else col.width,
            min_width=MESSAGE_MIN if grows else None,
        )
    for rec in records:
        cells = _cells(rec)
        table.add_row(*(cells[c.name] for c in cols))
    return table


def _yields(state: CampaignState) -> Table:
    table = Table(title="yield per strategy")
    for col in ("strategy", "schedules", "new clusters"):
        table.add_column(col)
    for name, c in sorted(state.by_strategy.items()):
        table.add_row(name, str(c["schedules"]), str(c["new"]))
    return table


def render(state: CampaignState, title: str, width: int = 120, height: int = 40) -> Group:
    """The dashboard for a `width` x `height` terminal: every part fits, the newest events and
    clusters first to stay."""
    elapsed = state.elapsed()
    head = Text.from_markup(
        f"elapsed [bold]{elapsed:.0f}s[/] / {state.seconds:.0f}s   "
        f"schedules [bold]{state.schedules}[/] ({state.rate():.2f}/s)   "
        f"clusters [bold red]{state.counts()}[/]\n"
        f"jobs {state.busy}/{state.jobs} busy   crashes {state.crashes}, hangs {state.hangs}"
        + (f", {state.lost} lost with nodes" if state.lost else "")
        + "   "
        f"worker peak {state.worker_rss_mb:.0f} MB, racefuzz {state.campaign_rss_mb:.0f} MB",
        overflow="ellipsis",
    )
    head.no_wrap = True
    # Rows for the events first, then the clusters, then (if room is left) the yields.
    room = height - HEAD_ROWS - 1  # the last line stays free: Live's cursor sits there
    events = min(max(len(state.log), 1), EVENT_ROWS, max(room - PANEL_CHROME - TABLE_CHROME, 1))
    room -= events + PANEL_CHROME
    yield_rows = TABLE_CHROME + len(state.by_strategy)
    wanted = max(len(state.findings), 1)
    show_yields = bool(state.by_strategy) and room - TABLE_CHROME - wanted >= yield_rows
    if show_yields:
        room -= yield_rows
    parts: list[Panel | Table] = [Panel(head, title=title)]
    parts.append(_clusters(state, width, max(room - TABLE_CHROME, 0)))
    if show_yields:
        parts.append(_yields(state))
    newest = list(state.log)[-events:] if state.log else ["(no events yet)"]
    lines = [line if len(line) <= width - 4 else line[: width - 5] + "…" for line in newest]
    parts.append(Panel("\n".join(lines), title="events"))
    return Group(*parts)


async def show(state: CampaignState, title: str, live: bool) -> None:
    """Until cancelled: redraw the dashboard, or print new log lines."""
    if live:
        console = Console()

        def view() -> Group:
            return render(state, title, console.size.width, console.size.height)

        with Live(view(), console=console, refresh_per_second=4) as screen:
            while True:
                await trio.sleep(0.25)
                screen.update(view())
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
                f"clusters: {state.counts()}, {state.crashes} crashes, {state.hangs} hangs"
                + (f", {state.lost} lost with nodes" if state.lost else ""),
                flush=True,
            )
        await trio.sleep(0.5)


def is_terminal() -> bool:
    return sys.stdout.isatty()
