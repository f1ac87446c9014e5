"""A campaign's results on disk: `summary.md`, `findings.json`, and optional JUnit XML.

Written from `CampaignState` alone: while the campaign runs (so a kill loses seconds, not the
run), at its end, and after Ctrl-C or SIGTERM too. `campaign_store` reads them back for
`--resume`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path
from typing import Any

from racefuzz.atomic_file import write_text
from racefuzz.campaign import store as campaign_store
from racefuzz.campaign.state import CampaignState, FindingRecord
from racefuzz.execute import unconfirmed
from racefuzz.report.console import ORIGIN_LABEL
from racefuzz.report.markdown import markdown_cell


def _record_json(rec: FindingRecord, root: Path) -> dict[str, Any]:
    d = rec.finding.to_json()
    d.update(
        verdict=rec.verdict,
        count=rec.count,
        signatures=rec.signature_count,
        first_seen_s=round(rec.first_seen_s, 2),
        original=str(rec.original.relative_to(root)),
        smallest_steps=len(rec.smallest.steps),
        state=rec.state,
        status=rec.status.value,
        notes=rec.notes,
        adopted_from=rec.adopted_from,
        retry=rec.retry or None,
        minimal_steps=rec.minimal_steps,
        reproduction=list(rec.reproduction) if rec.reproduction else None,
        duplicate_of=rec.duplicate_of,
        shrunk_to=rec.shrunk_to,
        bundle=str(rec.bundle.relative_to(root)) if rec.bundle else None,
    )
    if rec.places:
        d.update(where=rec.where(), nodes=[{"node": n, "device": k} for n, k in rec.places.items()])
    return d


def write_all(state: CampaignState, root: Path, header: dict[str, Any], junit: Path | None) -> None:
    records = sorted(list(state.findings.values()), key=lambda r: r.first_seen_s)
    # A resumed campaign writes into the same folder: an earlier entry `campaign_store` could
    # not restore (its schedule file gone, say) stays listed, never dropped.
    earlier = [f for f in campaign_store.entries(root) if _cluster_of(f) not in state.findings]
    payload = {
        **header,
        "elapsed_s": round(state.elapsed(), 1),
        "schedules": state.schedules,
        "lost": state.lost,
        "totals": {k: round(v, 1) for k, v in asdict(state.totals()).items()},
        "interrupted": state.interrupted,
        "internal_errors": state.internal_errors,
        "findings": [_record_json(r, root) for r in records] + earlier,
    }
    write_text(root / "findings.json", json.dumps(payload, indent=1) + "\n")
    write_text(root / "summary.md", summary_markdown(state, root, header, records))
    if junit is not None:
        write_text(junit, junit_xml(state, records, str(header.get("target", ""))))


def _cluster_of(entry: dict[str, Any]) -> str:
    """A findings.json entry's cluster (files written before clustering have signatures)."""
    return str(entry.get("cluster") or entry.get("signature"))


_SECTIONS = (
    ("new", "New findings (these fail the run)"),
    ("known", "Known issues (listed in the known-issues file; they do not fail the run)"),
    ("duplicate", "Duplicates (another cluster's bug: its minimal schedule, or its lone failure)"),
    ("misuse", "API misuse (outside ORT's contract: the application's fault, not the EP's)"),
)


def _totals_line(state: CampaignState) -> list[str]:
    """For a resumed folder: every run of it together (the line above is this run's)."""
    if not state.earlier.runs:
        return []
    t = state.totals()
    return [
        f"- this folder over its {t.runs} runs: {t.schedules} schedules in {t.seconds:.0f} s, "
        f"{t.crashes} worker crashes, {t.hangs} hangs"
    ]


def shrink_hint(records: list[FindingRecord], root: Path) -> str:
    """What to run next when shrinks were left undone, cut short, or gave a reproducer that
    fails less than 1 run in 4; "" when none were."""
    left = campaign_store.left_to_shrink(records)
    if not left:
        return ""
    return (
        f"{len(left)} cluster(s) not shrunk, cut short or seldom reproduced: "
        f"`racefuzz run --resume {root} --shrink-only` goes on with them"
    )


def unconfirmed_hint(root: Path) -> str:
    """Findings a persistent worker saw and no fresh worker showed again (`execute/
    unconfirmed.py`): not clusters, kept with the schedules before them; "" when none."""
    n = unconfirmed.count(root / "unconfirmed")
    if not n:
        return ""
    return (
        f"{n} finding(s) seen only after earlier schedules in one worker process, never in a "
        f"fresh one: `{root / 'unconfirmed'}` holds each with the schedules that ran before it"
    )


def summary_markdown(
    state: CampaignState, root: Path, header: dict[str, Any], records: list[FindingRecord]
) -> str:
    status = (
        f"interrupted ({state.interrupted_by or 'Ctrl-C'})" if state.interrupted else "finished"
    )
    if state.internal_errors:
        status = "stopped by an internal error of racefuzz"
    lines = [
        f"# racefuzz campaign: {header.get('target')}",
        "",
        f"- {status} after {state.elapsed():.0f} s of {state.seconds:.0f} s, "
        f"{state.jobs} job(s), seed {header.get('seed')}",
        f"- {state.schedules} schedules ({state.rate():.2f}/s), {state.crashes} worker crashes, "
        f"{state.hangs} hangs"
        + (f", {state.killed} workers killed from outside (not findings)" if state.killed else "")
        + (f", {state.lost} runs lost with fleet nodes (not findings)" if state.lost else ""),
        *_totals_line(state),
        f"- {len(records)} cluster(s): {state.counts()}; "
        f"{sum(r.signature_count for r in records)} distinct signature(s)",
        *[f"- {line}" for line in [shrink_hint(records, root), unconfirmed_hint(root)] if line],
        "",
    ]
    for verdict, title in _SECTIONS:
        group = [r for r in records if r.verdict == verdict]
        if not group:
            continue
        lines += [
            f"## {title}",
            "",
            "| kind | op | message | origin | runs | signatures | first at | schedule | state |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in group:
            f = r.finding
            where = str((r.bundle or r.original).relative_to(root))
            origin = ORIGIN_LABEL.get(f.origin, f.origin) if f.origin else "unclassified"
            lines.append(
                f"| {f.kind} | {f.op} | {markdown_cell(f.message)} | {origin} | {r.count} "
                f"| {r.signature_count} | {r.first_seen_s:.1f} s | `{where}` "
                f"| {markdown_cell(r.state + (f'; seen on {r.where()}' if r.places else ''))} |"
            )
        lines.append("")
    if not records:
        lines += ["Nothing found.", ""]
    if state.internal_errors:
        lines += ["## racefuzz internal errors (a bug in racefuzz; please report it)", ""]
        for text in state.internal_errors:
            lines += ["```text", text.rstrip(), "```", ""]
    if state.by_strategy:
        lines += [
            "## Yield per strategy",
            "",
            "| strategy | schedules | new clusters |",
            "|---|---|---|",
        ]
        for name, c in sorted(state.by_strategy.items()):
            lines.append(f"| {name} | {c['schedules']} | {c['new']} |")
        lines.append("")
    target = header.get("target_spec", header.get("target"))
    first = next((r for r in records if r.verdict == "new"), records[0] if records else None)
    if first is not None:
        schedule = first.bundle / "schedule.json" if first.bundle else first.original
        lines += [
            f"Replay the first cluster: `racefuzz replay {schedule} --target {target} --times 20`",
            "",
        ]
    return "\n".join(lines)


def junit_xml(state: CampaignState, records: list[FindingRecord], target: str) -> str:
    """One test case per cluster: new ones fail, known and misuse ones are skipped."""
    failing = [r for r in records if r.verdict == "new"]
    suite = ET.Element(
        "testsuite",
        name=f"racefuzz {target}",
        tests=str(max(1, len(records))),
        failures=str(len(failing)),
        skipped=str(len(records) - len(failing)),
        time=f"{state.elapsed():.1f}",
    )
    if not records:
        ET.SubElement(suite, "testcase", classname="racefuzz", name="campaign")
    for r in records:
        f = r.finding
        case = ET.SubElement(suite, "testcase", classname=f"racefuzz.{f.kind}", name=f.cluster)
        if r.verdict != "new":
            ET.SubElement(case, "skipped", message=f"{r.verdict}: {r.state}")
            continue
        fail = ET.SubElement(case, "failure", message=f"{f.kind} on {f.op}: {f.message}")
        fail.text = f"{f.raw}\norigin: {ORIGIN_LABEL.get(f.origin, f.origin)}\n{r.original}"
    return ET.tostring(suite, encoding="unicode") + "\n"
