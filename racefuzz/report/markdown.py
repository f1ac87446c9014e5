"""Rendering a report bundle (`racefuzz.report.bundle` writes it) as `report.md`.

`render(bundle)` is a pure function of the bundle's JSON, so `racefuzz report DIR` re-renders it
byte for byte. This module decides nothing about findings (the oracles and the shrinker did); it
lays out what they decided for a person who has not seen racefuzz before.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from racefuzz.errors import RacefuzzError
from racefuzz.judge.oracles import trace_buffers
from racefuzz.judge.outcome import Check, Exit, RunResult
from racefuzz.report import envinfo
from racefuzz.report.repro_parts import libraries_registered
from racefuzz.report.run_json import finding_from_json, run_from_json
from racefuzz.schedule.json_io import loads
from racefuzz.schedule.model import Schedule
from racefuzz.shrink.result import confirmed
from racefuzz.targets.model import Target

REPLAYS_SUGGESTED = 20
# repro.py replays at once for an overlap-clustered (GPU) target: webgpu's concurrent create-and-run
# reproduced 0/40 alone on an H200 and 19/40 eight at a time (bench/results/gpu.md).
REPRO_PARALLEL = 8
TRACE_LINES_SHOWN = 60
TEARDOWN = "teardown (dropping what the schedule left alive)"  # the worker's last step
ORIGIN = {
    "interleaving": "order-induced (its session alone, on the main thread, is fine)",
    "alone": "fails alone too (its session alone, on the main thread, fails the same way)",
    "": "not classified",
}


def _read(folder: Path, name: str, as_json: bool = True) -> Any:
    try:
        text = (folder / name).read_text(encoding="utf-8")
        return json.loads(text) if as_json else text
    except FileNotFoundError:
        raise RacefuzzError(f"'{folder}' is not a report bundle (no {name})") from None
    except ValueError as e:  # bad JSON, or bytes that are not UTF-8
        raise RacefuzzError(f"'{folder / name}' is not valid JSON ({e})") from None
    except OSError as e:
        raise RacefuzzError(f"cannot read '{folder / name}': {e.strerror}") from None


def markdown_cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object) -> str:
    s = " ".join(str(text).split())
    tick = "``" if "`" in s else "`"
    pad = " " if tick == "``" else ""
    return f"{tick}{pad}{s}{pad}{tick}".replace("|", "\\|")


def _fence(text: str, lang: str = "text") -> list[str]:
    fence = "~~~~" if "```" in text else "```"
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def timeline(schedule: Schedule, marked: Sequence[int] = ()) -> list[str]:
    """The schedule as a Markdown table: one column per thread, one row per step."""
    head = "| # | " + " | ".join(f"thread {t}" for t in range(schedule.threads)) + " |"
    lines = [head, "|--:|" + ":--|" * schedule.threads]
    for i, s in enumerate(schedule.steps):
        cells = [""] * schedule.threads
        text = markdown_cell(s.describe())
        if s.group is not None:
            text += f" *(overlap {s.group})*"
        if s.jitter_us:
            text += f" *(+{s.jitter_us} µs)*"
        cells[s.thread] = f"**{text}** ⟵ failed" if i in marked else text
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    end = len(schedule.steps)
    if end in marked:
        cells = [f"**{TEARDOWN}** ⟵ failed", *[""] * (schedule.threads - 1)]
        lines.append(f"| {end} | " + " | ".join(cells) + " |")
    return lines


def _step(schedule: Schedule, i: int) -> tuple[int, str]:
    """(thread, description) of step i; index len(steps) is the worker's teardown."""
    if i < len(schedule.steps):
        return schedule.steps[i].thread, schedule.steps[i].describe()
    return 0, TEARDOWN


def _groups(schedule: Schedule) -> list[str]:
    spans = [f"steps {a}-{b - 1} (group {schedule.steps[a].group})" for a, b in schedule.groups()]
    if not spans:
        return ["No overlap groups: every step runs alone, in the order shown."]
    return [
        "Overlap groups (released together behind a barrier, so their native calls truly "
        "overlap): " + ", ".join(spans) + "."
    ]


def _result_cell(run: RunResult, i: int) -> tuple[str, str]:
    o = run.outcome(i)
    if o is None:
        return (f"**{run.exit} in flight**" if i in run.in_flight else "not run"), ""
    if not o.ok:
        cut = "… (whole message below)" if len(o.message) > 160 else ""
        status = f"**error**: {markdown_cell(o.message[:160])}{cut}"
    elif o.skipped:
        status = markdown_cell(f"skipped: {o.detail}")
    elif o.check is not None and o.check is not Check.OK:
        status = f"**{o.check}**: {markdown_cell(o.detail)}"
    else:
        status = "ok"
    return status, f"{o.ms:.1f}"


def _outcomes(run: RunResult) -> list[str]:
    how = str(run.exit)
    if run.exit is not Exit.CLEAN:
        how += f" ({run.signal or f'exit code {run.returncode}'})"
        flying = ", ".join(str(i) for i in run.in_flight) or "none"
        how += f", steps in flight: {flying}"
    rss = f", peak RSS {run.peak_rss_mb:.0f} MB" if run.peak_rss_mb else ""
    lines = [f"Worker exit: {how}; {run.seconds:.2f} s{rss}.", ""]
    lines += ["| # | thread | step | result | ms |", "|--:|--:|:--|:--|--:|"]
    end = len(run.schedule.steps)
    shown = end + (run.outcome(end) is not None or end in run.in_flight)
    for i in range(shown):
        (thread, what), (status, ms) = _step(run.schedule, i), _result_cell(run, i)
        lines.append(f"| {i} | {thread} | {markdown_cell(what)} | {status} | {ms} |")
    failed = [o for o in run.outcomes if not o.ok]
    if failed:
        lines += ["", "### Messages", ""]
        for o in failed:
            thread, what = _step(run.schedule, o.step)
            lines += [f"Step {o.step} ({what}, thread {thread}):", ""]
            lines += [*_fence(o.message), ""]
        lines.pop()
    return lines


def explaining_trace(trace: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the trace lines that explain a mis-route, in order.

    The misrouted lines, and for each device buffer they touched, the last `alloc` before them
    by that buffer's owner (of the same size when the line says one): trace lines carry no
    buffer ids, so that allocation is the nearest evidence of where the memory came from.
    """
    keep: set[int] = set()
    for i, line in enumerate(trace):
        if not line.get("misroute"):
            continue
        keep.add(i)
        for owner in {b.get("owner") for b in trace_buffers(line)} - {None, "host"}:
            allocs = [
                j
                for j in range(i)
                if trace[j].get("ev") == "alloc" and trace[j].get("owner") == owner
            ]
            sized = [j for j in allocs if trace[j].get("bytes") == line.get("bytes")]
            if sized or allocs:
                keep.add((sized or allocs)[-1])
    return sorted(keep)


def _trace(run: RunResult) -> list[str]:
    picked = explaining_trace(run.trace)
    lines = ["## Trace (testbed, white-box)", ""]
    if not picked:
        lines.append(f"{len(run.trace)} trace lines, none mis-routed (all in logs/trace.jsonl).")
        return lines
    lines.append(
        "Lines with `misroute: true`, each after the allocation that made the memory it touched "
        "(line numbers count from 1 in logs/trace.jsonl):"
    )
    lines.append("")
    body = [f"{i + 1:>6}  {json.dumps(run.trace[i])}" for i in picked[:TRACE_LINES_SHOWN]]
    if len(picked) > TRACE_LINES_SHOWN:
        body.append(f"… {len(picked) - TRACE_LINES_SHOWN} more")
    return lines + _fence("\n".join(body))


def _number(v: object) -> str:
    return f"{v:.1f}" if isinstance(v, float) else markdown_cell(v)


def _shrink(stats: Mapping[str, Any] | None, original: Schedule, minimal: Schedule) -> list[str]:
    lines = ["## Shrinking", "", "| | original | minimal |", "|:--|--:|--:|"]
    lines.append(f"| steps | {len(original.steps)} | {len(minimal.steps)} |")
    lines.append(f"| threads | {original.threads} | {minimal.threads} |")
    lines.append(
        f"| overlap groups | {len(list(original.groups()))} | {len(list(minimal.groups()))} |"
    )
    used = [", ".join(sorted(s.models())) or "-" for s in (original, minimal)]
    lines.append(f"| models | {used[0]} | {used[1]} |")
    if stats is None:
        return [*lines, "", "No shrink statistics were recorded."]
    raw = stats.get("passes") or []
    passes = [{"name": k, **v} for k, v in raw.items()] if isinstance(raw, Mapping) else list(raw)
    columns = [c for p in passes for c in p if c != "name"]
    columns = list(dict.fromkeys(columns))
    if passes:
        lines += ["", "| pass | " + " | ".join(columns) + " |", "|:--|" + "--:|" * len(columns)]
        for p in passes:
            cells = [_number(p.get(c, "")) for c in columns]
            lines.append(f"| {markdown_cell(p.get('name', '?'))} | " + " | ".join(cells) + " |")
    rest = [(k, v) for k, v in stats.items() if k != "passes" and not isinstance(v, dict | list)]
    if rest:
        lines.append("")
        lines += [f"- {markdown_cell(k)}: {_number(v)}" for k, v in rest]
    return lines


def _commands(meta: Mapping[str, Any], minimal: Schedule) -> list[str]:
    target = Target.from_json(meta["target"])
    config = f" --config {meta['config']}" if meta.get("config") else ""
    replay = f"racefuzz replay schedule.json{config} --target {shlex.quote(meta['target_spec'])}"
    names = libraries_registered(minimal, target)
    paths = {lib.name: str(lib.path) for lib in target.libraries}
    if len(names) == 1:
        repro = f"python repro.py {shlex.quote(paths[names[0]])}"
    else:
        repro = "python repro.py" + "".join(
            f" --library {shlex.quote(f'{n}={paths[n]}')}" for n in names
        )
    if target.cluster_by == "overlap":  # a GPU target's race may show only under load
        repro += f" --parallel {REPRO_PARALLEL}"
    seed = meta.get("seed", 0)
    replay += f" --times {REPLAYS_SUGGESTED}" + (f" --seed {seed}" if seed else "")
    return _fence(f"{replay}\n{repro}", "sh")


def _size(schedule: Schedule) -> str:
    steps, threads = len(schedule.steps), schedule.threads
    return f"{steps} step{'s' * (steps != 1)} on {threads} thread{'s' * (threads != 1)}"


def render(bundle_dir: Path) -> str:
    """report.md for a bundle, from its JSON files only."""
    d = bundle_dir
    raw_finding = _read(d, "finding.json")
    finding = finding_from_json(raw_finding)
    k, n = raw_finding["reproduction"]
    meta = _read(d, "bundle.json")
    minimal = loads(_read(d, "schedule.json", False), str(d / "schedule.json"))
    original = loads(_read(d, "original.json", False), str(d / "original.json"))
    run = run_from_json(_read(d, "failing_run.json"))
    env = _read(d, "env.json")
    marked = run.in_flight if finding.kind in ("crash", "hang", "leak") else ()
    if finding.step is not None and not marked:
        marked = (finding.step,)
    shrunk = "not shrunk" if minimal == original else f"shrunk from {_size(original)}"
    if not confirmed(k, n):
        shrunk = f"NOT REPRODUCED by its confirmation replays, {shrunk}"
    rate = f"{k} of {n} replays" + (f" ({100 * k / n:.0f}%)" if n else "")
    title = f"{finding.kind} in `{finding.op}`: {markdown_cell(finding.message)}"
    if finding.misuse:
        title = f"API misuse (outside ORT's contract, not an EP bug): {title}"
    verdict = f"reproduced {k}/{n}" if confirmed(k, n) else f"NOT REPRODUCED ({k}/{n})"
    out = [f"# {title} ({verdict})", ""]
    out += ["| | |", "|:--|:--|"]
    out += [
        f"| kind | {_code(finding.kind)} |",
        f"| op | {_code(finding.op)} |",
        f"| profiles | {', '.join(_code(p) for p in finding.profiles) or '-'} |",
        f"| message (normalised) | {_code(finding.message)} |",
        f"| origin | {ORIGIN.get(finding.origin, markdown_cell(finding.origin))} |",
        *([f"| API misuse | {markdown_cell(finding.misuse)} |"] if finding.misuse else []),
        f"| reproduced | {rate} of the minimal schedule |",
        f"| target | {_code(meta['target_spec'])} |",
        f"| found | {meta['created']} |",
        f"| cluster | {_code(finding.cluster)} |",
        f"| signature | {_code(finding.signature)} |",
        "",
        "Raw message:",
        "",
        *_fence(finding.raw or "(none)"),
        "",
        "## Minimal schedule",
        "",
        f"{_size(minimal)} ({shrunk}). Steps run top to bottom, one at a time, each on its thread.",
        "",
        *timeline(minimal, marked),
        "",
        *_groups(minimal),
        "",
        "## A failing run, step by step",
        "",
        *_outcomes(run),
    ]
    if run.stacks:
        out += [
            "",
            "## Stacks: the faulting thread's native frames, then every thread's Python stack",
            "",
            *_fence(run.stacks),
        ]
    if run.trace:
        out += ["", *_trace(run)]
    out += ["", *_shrink(meta.get("shrink"), original, minimal), "", "## Environment", ""]
    out += [f"- {markdown_cell(line)}" for line in envinfo.summary(env)]
    out += ["", "Everything else is in env.json."]
    out += ["", "## Files", ""]
    out += [
        "- `schedule.json`: the minimal schedule; `original.json`: the schedule as found",
        "- `repro.py`: stand-alone replay (needs only onnxruntime and numpy)",
        "- `finding.json`, `failing_run.json`, `bundle.json`, `env.json`: the facts this "
        "report is rendered from (`racefuzz report DIR` re-renders it)",
        "- `logs/stderr.txt`: stderr of the failing run"
        + (", `logs/trace.jsonl`: its full trace" if run.trace else ""),
    ]
    out += ["", "## Replay it", "", *_commands(meta, minimal)]
    return "\n".join(out) + "\n"
