"""Pieces of `repro.py` built from racefuzz's own code and data: Python literals of any text,
the sources of racefuzz's worker and judge it embeds, the script's plain-text timeline and usage
line.

Kept apart from the script's template (`repro_script`) so that each stays small; nothing here
runs anything.
"""

from __future__ import annotations

import ast
import importlib
import inspect

from racefuzz.execute import native_build
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import SPECS, Subject
from racefuzz.targets import sanitizer
from racefuzz.targets.model import Target
from racefuzz.worker import (
    base,
    env_api,
    handoff,
    holds,
    kept,
    lifeline,
    native_trace,
    ops,
    protocol,
    runs,
    sequencer,
)
from racefuzz.worker import main as worker_main

SUPPRESSIONS_NAME = "tsan.supp"


def literal(text: str) -> str:
    """A Python literal for `text`: a raw triple-quoted string when that reads back exactly."""
    candidate = f"r'''{text}'''"
    try:
        if ast.literal_eval(candidate) == text:
            return candidate
    except (SyntaxError, ValueError):
        pass  # e.g. the text holds ''' or ends with a quote or a backslash
    return repr(text)


def text_timeline(schedule: Schedule, failing_step: int | None = None) -> str:
    """A plain-text table, one column per thread, for terminals and the script's output."""
    rows = [["#", *(f"thread {t}" for t in range(schedule.threads))]]
    for i, s in enumerate(schedule.steps):
        cells = [""] * schedule.threads
        text = s.describe()
        if s.group is not None:
            text += f" [overlap {s.group}]"
        if s.jitter_us:
            text += f" (+{s.jitter_us}us)"
        if i == failing_step:
            text += " <- failed"
        cells[s.thread] = text
        rows.append([str(i), *cells])
    if failing_step == len(schedule.steps):  # the worker's teardown, on the main thread
        rows.append([str(failing_step), "teardown <- failed", *[""] * (schedule.threads - 1)])
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def usage(libraries: list[str]) -> str:
    """The library arguments of the usage line, each with a leading space ('' for none)."""
    if len(libraries) == 1:
        return " PATH_TO_EP_LIBRARY"
    return "".join(f" --library {name}=PATH" for name in libraries)


def repro_env(target: Target) -> dict[str, str]:
    """The target's environment with its sanitizer's preload and options; the suppressions
    file is the bundle's copy beside the script (`write_bundle` puts it there)."""
    supp = f"@REPRO_DIR@/{SUPPRESSIONS_NAME}"
    return {**target.env, **sanitizer.env(target.sanitizer, suppressions=supp)}


def libraries_registered(schedule: Schedule, target: Target) -> list[str]:
    """The target's libraries the schedule registers (all of them for a bare `register`)."""
    named = {s.library for s in schedule.steps if SPECS[s.op].subject is Subject.LIBRARY}
    return [lib.name for lib in target.libraries if None in named or lib.name in named]


def embedded_sources(native: bool) -> dict[str, str]:
    """The script's markers for racefuzz's own code it runs, as literals; `native`: also the C
    source of the API helper (`racefuzz/native/envapi.c`), which the script compiles."""
    modules = {
        "SEQUENCER": sequencer,
        "WORKER": worker_main,
        "LIFELINE": lifeline,
        "NATIVE_TRACE": native_trace,
        "PROTOCOL": protocol,
        "BASE": base,
        "OPS": ops,
        "HANDOFF": handoff,
        "KEPT": kept,
        "HOLDS": holds,
        "RUNS": runs,
        "ENV_API": env_api,
    }
    out = {marker: literal(inspect.getsource(m)) for marker, m in modules.items()}
    c_source = (native_build.NATIVE_DIR / "envapi.c").read_text(encoding="utf-8") if native else ""
    out["ENVAPI_C"] = literal(c_source)
    return out


# The modules `oracles.judge`, `oracles.evidence` and `ending.Watch` need (all stdlib-only), each
# after what it imports: repro.py loads them in this order under these names.
JUDGE_MODULES = (
    "racefuzz.errors",
    "racefuzz.atomic_file",
    "racefuzz.schedule.op_spec",
    "racefuzz.schedule.op_table",
    "racefuzz.schedule.prefix",
    "racefuzz.schedule.contract_rules",
    "racefuzz.schedule.rules",
    "racefuzz.schedule.model",
    "racefuzz.schedule.contract",
    "racefuzz.schedule.json_io",
    "racefuzz.schedule.alone",
    "racefuzz.targets.sanitizer",
    "racefuzz.judge.sanitizer_report",
    "racefuzz.worker.protocol",
    "racefuzz.judge.identity",
    "racefuzz.judge.outcome",
    "racefuzz.judge.oracles",
    "racefuzz.judge.ending",
    "racefuzz.judge.race_symptoms",
)


def judge_sources() -> list[tuple[str, str]]:
    """(module name, source) of each module of racefuzz's judge, in `JUDGE_MODULES` order."""
    return [(name, inspect.getsource(importlib.import_module(name))) for name in JUDGE_MODULES]
