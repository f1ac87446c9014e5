"""Runs and findings as JSON and back: what bundles and campaign folders store.

`run_to_json` leaves `stderr_tail` out (a bundle keeps it in `logs/`); `run_from_json` takes it
back as an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from racefuzz.judge.outcome import Exit, Finding, RunResult, StepOutcome
from racefuzz.schedule.json_io import from_json_obj, to_json_obj


def run_to_json(run: RunResult) -> dict[str, Any]:
    """A run as JSON, without `stderr_tail` (the bundle keeps that in logs/)."""
    d = asdict(run)  # enums are StrEnums: they encode as their values
    del d["stderr_tail"]
    d["schedule"] = to_json_obj(run.schedule)
    d["findings"] = [f.to_json() for f in run.findings]
    return d


def finding_from_json(d: Mapping[str, Any]) -> Finding:
    known = {f.name for f in fields(Finding)} - {"profiles"}
    return Finding(**{k: v for k, v in d.items() if k in known}, profiles=tuple(d["profiles"]))


def run_from_json(d: Mapping[str, Any], stderr_tail: str = "") -> RunResult:
    known = {f.name for f in fields(RunResult)}
    converted = {
        "schedule": from_json_obj(d["schedule"], "failing_run.json"),
        "outcomes": tuple(StepOutcome.from_json(o) for o in d["outcomes"]),
        "exit": Exit(d["exit"]),
        "in_flight": tuple(d.get("in_flight", ())),
        "trace": tuple(d.get("trace", ())),
        "findings": tuple(finding_from_json(f) for f in d.get("findings", ())),
        "stderr_tail": stderr_tail,
    }
    return RunResult(**{**{k: v for k, v in d.items() if k in known}, **converted})
