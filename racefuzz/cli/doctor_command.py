"""`racefuzz doctor`: a target checked piece by piece, before anyone fuzzes it.

It registers the libraries, lists the EP devices, and runs each profile x model alone on the
main thread: `create`, then every op `doctor` names in the op table in each of its modes (all
IOBinding modes of `run_bound`, every copy mode). Each cell of the table is a word and, when
there is more to say, a note number; the notes come below the table, so the table fits 100
columns. Every output is compared with ORT's CPU EP and its largest differences measured, and
doctor suggests the tolerance a target's outputs would need.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Console
from rich.table import Table

from racefuzz.cache import cache_root
from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.schedule.op_table import SPECS
from racefuzz.targets import preflight
from racefuzz.targets.model import Profile, Target, describe
from racefuzz.worker.base import ATOL, RTOL
from racefuzz.worker.protocol import Skip

_DIFF = re.compile(r"^abs (\S+) rel (\S+) need (\S+)$")
# A suggested tolerance is this many times the largest difference measured, and at least the
# worker's default: an EP's own rounding varies a little with load and input.
MARGIN = 10.0


@dataclass
class Notes:
    """The texts below the table, numbered once each however many cells share one."""

    texts: list[str] = field(default_factory=list)

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


@dataclass
class Differences:
    abs_max: float = 0.0
    rel_max: float = 0.0
    need: float = 0.0  # the smallest rtol = atol that passes every output (`differences`)
    measured: bool = False

    def add(self, detail: str) -> None:
        m = _DIFF.match(detail)
        if m is not None:
            self.measured = True
            self.abs_max = max(self.abs_max, float(m.group(1)))
            self.rel_max = max(self.rel_max, float(m.group(2)))
            self.need = max(self.need, float(m.group(3)))

    def merge(self, other: Differences) -> None:
        self.measured = self.measured or other.measured
        self.abs_max = max(self.abs_max, other.abs_max)
        self.rel_max = max(self.rel_max, other.rel_max)
        self.need = max(self.need, other.need)


def doctor(target: Target, runner: Runner, version: str) -> int:
    out = Console(width=min(Console().width, 100))
    out.print(f"onnxruntime {version}, python {sys.version.split()[0]}, cache {cache_root()}")
    out.print(describe(target))
    probe = preflight.probe(target)
    if "error" in probe:
        out.print(f"[red]{probe['error']}[/]")
        return 1
    for name, state in dict(probe.get("libraries", {})).items():
        out.print(f"library {name}: {state}")
    out.print(_devices(probe))
    measuring = replace(runner, options=replace(runner.options, measure=True))
    columns = [op for op, spec in SPECS.items() if spec.doctor]  # create first: it makes s1
    # No rules between columns: ten columns of a word and a note number each fit 100.
    checks = Table(
        title="each profile and model alone, on the main thread",
        box=None,
        header_style="bold underline",
    )
    for col in ("profile", "model", "nodes", *(op.value for op in columns), "max abs", "max rel"):
        checks.add_column(col)
    placed = preflight.on_ep(target, probe)
    notes, overall, failing = Notes(), Differences(), 0
    for profile in target.profiles:
        for model in target.models:
            steps, spans = _steps(columns, profile.name, model)
            result = measuring.run(Schedule(1, steps, "doctor"))
            failing += bool(result.findings)
            diffs = Differences()
            cells = [_op_cell(result, steps, span, notes, diffs) for span in spans]
            overall.merge(diffs)
            where = _placement(probe, profile, model, placed.get((profile.name, model)), notes)
            checks.add_row(profile.name, model, where, *cells, *_diff_cells(diffs))
    out.print(checks)
    for k, text in enumerate(notes.texts, 1):
        out.print(f"[{k}] {text}", highlight=False, markup=False)
    out.print(_tolerance_line(target, overall))
    for line in preflight.placement_warnings(target, probe):
        out.print(f"[yellow]warning: {line}[/]")
    problems = preflight.problems(target, probe)
    for line in problems:
        out.print(f"[red]problem: {line}[/]", highlight=False)
    if failing:
        pairs = len(target.profiles) * len(target.models)
        out.print(
            f"[yellow]{failing} of {pairs} profile/model pair(s) fail alone: campaigns skip what "
            "a target cannot run at all; replay reports such failures as 'fails alone too'.[/]"
        )
    return 1 if failing or problems else 0


def _devices(probe: dict[str, Any]) -> Table:
    devices = Table(title="EP devices after registration")
    for col in ("ep", "vendor", "device", "vendor id", "memory (default, host-accessible)"):
        devices.add_column(col)
    for d in probe.get("devices", []):
        mem = ", ".join(str(m) for m in d["memory"])
        devices.add_row(d["ep_name"], d["ep_vendor"], d["device_type"], hex(d["vendor_id"]), mem)
    return devices


def _steps(columns: list[Op], profile: str, model: str) -> tuple[tuple[Step, ...], list[range]]:
    """register, then each column's op in each of its modes; the step indexes of each column."""
    steps: list[Step] = [Step(0, Op.REGISTER)]
    spans = []
    for op in columns:
        start = len(steps)
        for mode in SPECS[op].mode_choices or (None,):
            names = {"session": "s1", "profile": profile, "model": model, "mode": mode}
            steps.append(make_step(op, 0, **names))
        spans.append(range(start, len(steps)))
    return tuple(steps), spans


def _op_cell(
    result: RunResult, steps: tuple[Step, ...], span: range, notes: Notes, diffs: Differences
) -> str:
    """One op in all its modes: the worst failure, else "ok" (or "skipped" when no mode ran),
    with one note per distinct thing said, naming the modes it was said of."""
    words: list[str] = []
    said: dict[str, list[str]] = {}
    for i in span:
        word, text = _step_word(result, i)
        o = result.outcome(i)
        if o is not None and word == "ok":
            diffs.add(o.detail)
        words.append(word)
        if text:
            said.setdefault(text, []).append(steps[i].mode or "plain")
    failed = [w for w in _SEVERITY if w in words and w not in ("skip", "ok")]
    worst = failed[0] if failed else "ok" if "ok" in words else "skip"
    op = steps[span[0]].op.value
    marks = [notes.mark(f"{_label(op, modes)}: {text}") for text, modes in said.items()]
    colour = {"ok": "green", "skip": "yellow"}.get(worst, "red")
    return f"[{colour}]{worst}[/]" + (" " + "".join(marks) if marks else "")


def _label(op: str, modes: list[str]) -> str:
    return op if modes == ["plain"] else f"{op} ({', '.join(modes)})"


_SEVERITY = ("died", "error", "zeroed", "mismatch", "misplaced", "skip", "ok")


def _step_word(result: RunResult, i: int) -> tuple[str, str]:
    o = result.outcome(i)
    if o is None:
        return "died", f"the worker ended: {result.exit} ({result.signal or result.returncode})"
    if not o.ok:
        return "error", _one_line(o.message)
    if o.skipped == Skip.MISSING:
        return "skip", "an earlier step failed"
    if o.skipped:  # the EP, the profile or this machine lacks what the op needs
        return "skip", o.detail
    if o.check is not None and str(o.check) != "ok":
        return str(o.check), o.detail
    return "ok", ""


def _one_line(text: str, most: int = 400) -> str:
    """The message on one line; a long one keeps its start, where EPs and ORT say what failed."""
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[:most] + "…"


def _placement(
    probe: dict[str, Any],
    profile: Profile,
    model: str,
    counts: tuple[int, int] | None,
    notes: Notes,
) -> str:
    """e.g. "3/3", or "0/3 [2]" with a note saying where ORT put the others."""
    cell = dict(probe.get("placement") or {}).get(profile.name, {}).get(model)
    if cell is None:
        return "-"  # one of ORT's own EPs
    if counts is None:
        return "[red]none[/]"  # the session was not made
    mine, total = counts
    if mine == total:
        return f"[green]{mine}/{total}[/]"
    eps: dict[str, list[str]] = cell["eps"]
    elsewhere = ", ".join(f"{ep} {len(n)}" for ep, n in eps.items() if ep != profile.ep_name)
    colour = "red" if mine == 0 else "yellow"
    mark = notes.mark(f"{model} on {profile.name}: nodes elsewhere: {elsewhere}")
    return f"[{colour}]{mine}/{total}[/] {mark}"


def _diff_cells(diffs: Differences) -> tuple[str, str]:
    if not diffs.measured:
        return "-", "-"
    return f"{diffs.abs_max:.2g}", f"{diffs.rel_max:.2g}"


def suggested(largest: float, floor: float) -> float:
    """MARGIN times `largest`, rounded up to 1, 2 or 5 times a power of ten; at least `floor`."""
    want = max(largest * MARGIN, floor)
    power = 10.0 ** math.floor(math.log10(want))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= want * (1 - 1e-9))


def _tolerance_line(target: Target, d: Differences) -> str:
    rtol, atol = target.tolerance or (RTOL, ATOL)
    given = "its own" if target.tolerance else "the default"
    tol = suggested(d.need, max(RTOL, ATOL))
    return (
        f"largest differences from ORT's CPU EP: abs {d.abs_max:.3g}, rel {d.rel_max:.3g} "
        f"(rel: where the reference is above 1e-3); target tolerance ({given}): rtol {rtol:g}, "
        f"atol {atol:g}; suggested: rtol {tol:g}, atol {tol:g} ({MARGIN:g}x the smallest that "
        "passes every output, at least the default)"
    )
