"""Builds `repro.py`: a stand-alone script that replays one finding on a machine without racefuzz.

An EP developer receiving a ticket has onnxruntime, numpy and their own EP build, not racefuzz,
so the script embeds all a replay needs: the source of racefuzz's worker and of its judge (exec'd
into modules under their real names: the replay runs the code racefuzz ran and is judged by the
code that judged racefuzz's runs, `ending.Watch`, `oracles.judge` and `oracles.evidence`, not by
a hand-written copy), the schedule, the resolved profiles, the models (base64 ONNX), the target's
environment (with a sanitizer's preload and options) and the finding with its cluster key and
pinned symptom. Each replay runs in a child process, so a crash or a hang is observed, not
fatal. The target's environment applies only where the caller's does not set a variable:
`RACEFUZZ_TESTBED_BUGS= python repro.py ...` runs the testbed's fixed design. This module only
builds text; it never runs the script.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any

from racefuzz.execute.executor import RunOptions
from racefuzz.judge.outcome import Finding
from racefuzz.report.repro_parts import (
    embedded_sources,
    judge_sources,
    libraries_registered,
    literal,
    repro_env,
    text_timeline,
    usage,
)
from racefuzz.report.repro_template import TEMPLATE
from racefuzz.schedule.json_io import to_json_obj
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import C_API_OPS
from racefuzz.targets import layer
from racefuzz.targets.model import Target
from racefuzz.worker import WORKER_BUG_EXIT

DEFAULT_TIMES = 20
# What the script judges replays by, and shows.
_FINDING = ("kind", "op", "message", "raw", "overlap", "cluster")


def repro_source(
    schedule: Schedule,
    finding: Finding,
    target: Target,
    models: Mapping[str, bytes],
    *,
    limits: RunOptions | None = None,
    version: str = "",
) -> str:
    """The text of `repro.py` for `finding` seen on `schedule` against `target`.

    `models` maps each model name the schedule uses to its ONNX bytes; `limits` are the options
    of the runs (the seed of their random inputs, their timeouts and memory ceiling: a leak is
    a run past it), racefuzz's defaults when None.
    """
    missing = sorted(schedule.models() - set(models))
    if missing:
        raise ValueError(f"repro_source needs the bytes of model '{missing[0]}'")
    libraries = libraries_registered(schedule, target)
    profiles = {name: target.profile(name).to_json() for name in sorted(schedule.profiles())}
    encoded = [
        f"    {name!r}: {literal(base64.encodebytes(models[name]).decode('ascii'))},"
        for name in sorted(schedule.models())
    ]
    title = f"{finding.kind} in {finding.op}: {finding.message}"  # it lands in a docstring
    limits = limits or RunOptions()
    # What replays are counted by: the cluster, and under overlap clustering the symptom the
    # finding showed (`oracles.evidence`), as the shrink that made the bundle counted them.
    shown = {k: getattr(finding, k) for k in _FINDING}
    shown["symptom"] = finding.symptom if finding.overlap else ""
    fills: dict[str, Any] = {
        "TITLE": title.replace("\\", "\\\\").replace('"""', "'''"),
        "USAGE": usage(libraries),
        "VERSION": version,
        "TIMES": DEFAULT_TIMES,
        "FINDING": literal(json.dumps(shown, indent=1)),
        "TIMELINE": literal(text_timeline(schedule, finding.step)),
        "SCHEDULE": literal(json.dumps(to_json_obj(schedule), indent=1)),
        "BY_OVERLAP": repr(target.cluster_by == "overlap"),
        "PROFILES": literal(json.dumps(profiles, indent=1)),
        "RECORDED": repr({name: str(target.library(name).path) for name in libraries}),
        # Behind racefuzz's EP-ABI layer: what the layer stands in front of, for --no-layer.
        "BEHIND": repr(
            {name: str(layer.unwrap(target).library(name).path) for name in libraries}
            if target.layer
            else {}
        ),
        "ENV": literal(json.dumps(repro_env(target), indent=1)),
        "TRACE": repr(target.trace_envs()),
        "WORKER_BUG_EXIT": repr(WORKER_BUG_EXIT),
        "STEP_TIMEOUT": repr(float(limits.step_timeout)),
        "SCHEDULE_TIMEOUT": repr(float(limits.schedule_timeout)),
        "MAX_RSS_MB": repr(float(limits.max_rss_mb)),
        "SEED": repr(limits.seed),
        "TOLERANCE": repr(list(target.tolerance) if target.tolerance else None),
        "MODELS": "\n".join(encoded),
        "JUDGE": "\n".join(f"    {n!r}: {literal(text)}," for n, text in judge_sources()),
        **embedded_sources(native=bool(C_API_OPS & set(schedule.ops()))),
    }
    # One pass over the markers: a filled value that happens to contain `@@X@@` stays as is.
    return re.sub(r"@@([A-Z_]+)@@", lambda m: str(fills[m.group(1)]), TEMPLATE)
