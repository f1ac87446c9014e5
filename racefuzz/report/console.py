"""Terminal rendering of schedules, outcomes and findings (rich), shared by the commands.

Only presentation lives here: nothing in this module runs a schedule or decides a verdict.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from racefuzz.execute.replay import ReplaySummary
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.model import Schedule

# "order-induced", not "interleaving-induced": one thread's order of calls breaks EPs too (B3).
ORIGIN_LABEL = {"interleaving": "order-induced", "alone": "fails alone too", "": "-"}


def timeline(schedule: Schedule) -> Table:
    """One column per thread, one row per step: the order of calls at a glance."""
    table = Table(title=schedule.name or None, show_lines=False)
    table.add_column("#", justify="right")
    for t in range(schedule.threads):
        table.add_column(f"thread {t}")
    for i, s in enumerate(schedule.steps):
        cells = [""] * schedule.threads
        mark = f" [overlap {s.group}]" if s.group is not None else ""
        jitter = f" (+{s.jitter_us}µs)" if s.jitter_us else ""
        cells[s.thread] = escape(s.describe() + mark + jitter)  # `[compute]` is no markup
        table.add_row(str(i), *cells)
    return table


def outcome_table(result: RunResult) -> Table:
    table = Table(show_lines=False)
    for col in ("#", "thread", "step", "result", "ms"):
        table.add_column(col, justify="right" if col in ("#", "ms") else "left")
    in_flight = set(result.in_flight)
    rows = [(i, str(s.thread), escape(s.describe())) for i, s in enumerate(result.schedule.steps)]
    n = len(result.schedule.steps)
    if result.outcome(n) is not None or n in in_flight:
        rows.append((n, "0", "teardown (drop what is left alive)"))
    for i, thread, what in rows:
        o = result.outcome(i)
        if o is None:
            status = f"[red]{result.exit} in flight[/]" if i in in_flight else "[dim]not run[/]"
            ms = ""
        else:
            if not o.ok:
                status = f"[red]error[/]: {escape(o.message[:100])}"
            elif o.skipped:
                status = f"[dim]skipped: {escape(o.detail)}[/]"
            elif o.check is not None and o.check != "ok":
                status = f"[red]{o.check}[/]: {escape(o.detail)}"
            else:
                status = "[green]ok[/]"
            ms = f"{o.ms:.1f}"
        table.add_row(str(i), thread, what, status, ms)
    return table


def findings_table(findings: list[Finding], counts: dict[str, int], times: int) -> Table:
    table = Table(show_lines=False)
    for col in ("kind", "op", "profiles", "message", "step", "reproduced", "origin"):
        table.add_column(col)
    for f in findings:
        table.add_row(
            f"[red]{f.kind}[/]",
            f.op,
            ",".join(f.profiles),
            escape(f.message),
            "-" if f.step is None else str(f.step),
            f"{counts.get(f.signature, 0)}/{times}",
            "[magenta]API misuse[/]" if f.misuse else ORIGIN_LABEL.get(f.origin, f.origin),
        )
    return table


def print_summary(console: Console, label: str, summary: ReplaySummary) -> None:
    shown = summary.shown_run()
    verdict = "[red]FINDINGS[/]" if summary.failed else "[green]clean[/]"
    if summary.misuse_only:
        verdict = "[magenta]API MISUSE[/] (outside ORT's contract, not counted as an EP bug)"
    console.rule(f"{label}: {verdict}")
    if summary.schedule.description:
        console.print(summary.schedule.description, style="dim")
    console.print(outcome_table(shown))
    if summary.findings:
        console.print(
            findings_table(list(summary.findings.values()), summary.counts, summary.times)
        )
        if shown.stacks:
            console.print("[bold]stacks[/] (the faulting thread's native frames, then Python's):")
            console.print(shown.stacks[:6000], markup=False, highlight=False)
