"""Writing a report bundle: the folder a finding becomes, ready to attach to a bug ticket.

`write_bundle` fills a temporary folder and renames it into place whole, as
`<root>/<YYYY-MM-DD>-<signature slug>/` (`-2`, `-3`, ... when the name is taken, so two processes
never share one): a bundle on disk is complete, whatever killed racefuzz. It holds the JSON facts:
`finding.json` (the finding and its reproduction rate), `schedule.json` (minimal),
`original.json`, `failing_run.json` (a failing run of the minimal schedule, stderr excepted),
`bundle.json` (target, its spec, shrink statistics), `env.json`, `logs/` (stderr tail, testbed
trace) and `repro.py`. `report.md` comes last and is exactly `report.render(bundle)`.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from racefuzz.execute.executor import RunOptions
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.report import envinfo
from racefuzz.report.markdown import render
from racefuzz.report.repro_parts import SUPPRESSIONS_NAME
from racefuzz.report.repro_script import repro_source
from racefuzz.report.run_json import run_to_json
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Schedule
from racefuzz.targets import models, sanitizer
from racefuzz.targets.model import Target, is_builtin
from racefuzz.targets.toml_io import target_toml

BUNDLE_VERSION = 1
TMP_BUNDLE_PREFIX = ".tmp-bundle-"  # a bundle being written; never read as one


def create_folder(root: Path, base: str) -> Path:
    """A new folder `root/base`, or `base-2`, `base-3`...: created exclusively, never shared."""
    root.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = root / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()  # exclusive: fails if another process took the name first
            return path
        except FileExistsError:
            n += 1


def _jsonable(obj: object) -> object:
    # For shrink statistics handed over as dataclasses (a shrinker's per-pass counters).
    return asdict(obj) if is_dataclass(obj) and not isinstance(obj, type) else str(obj)


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=1, default=_jsonable) + "\n", encoding="utf-8")


def write_bundle(
    root: Path,
    finding: Finding,
    original: Schedule,
    minimal: Schedule,
    failing_run: RunResult,
    target: Target,
    target_spec: str,
    reproduced: tuple[int, int],
    shrink_stats: Mapping[str, object] | None = None,
    *,
    limits: RunOptions | None = None,
    node_env: Mapping[str, Any] | None = None,
) -> Path:
    """Write the bundle for `finding` under `root`; returns its folder. `limits` are the runs'
    options (the seed of their inputs, their timeouts and memory ceiling), which repro.py keeps.
    `node_env`: the facts of the fleet node the failure ran on, for env.json (else this
    machine's)."""
    date = datetime.date.today().isoformat()

    def fill(folder: Path) -> None:
        k, n = reproduced
        _write_json(folder / "finding.json", {**finding.to_json(), "reproduction": [k, n]})
        (folder / "schedule.json").write_text(dumps(minimal), encoding="utf-8")
        (folder / "original.json").write_text(dumps(original), encoding="utf-8")
        _write_json(folder / "failing_run.json", run_to_json(failing_run))
        meta = {
            "version": BUNDLE_VERSION,
            "created": date,
            "target_spec": target_spec,
            "seed": (limits or RunOptions()).seed,
            "target": target.to_json(),
            "shrink": None if shrink_stats is None else dict(shrink_stats),
        }
        if not is_builtin(target_spec):  # a racefuzz.toml target: the bundle carries its table
            (folder / "racefuzz.toml").write_text(target_toml(target), encoding="utf-8")
            meta["config"] = "racefuzz.toml"
        _write_json(folder / "bundle.json", meta)
        env = dict(node_env) if node_env is not None else envinfo.collect(target)
        if failing_run.node:  # a fleet's: the node and device kind it failed on
            env["ray"] = {"node": failing_run.node, "device": failing_run.device}
        _write_json(folder / "env.json", env)
        logs = folder / "logs"
        logs.mkdir()
        (logs / "stderr.txt").write_text(failing_run.stderr_tail, encoding="utf-8")
        if failing_run.trace:
            lines = [json.dumps(line) for line in failing_run.trace]
            (logs / "trace.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        model_bytes = {m: models.model_bytes(m) for m in sorted(minimal.models())}
        version = env["racefuzz"] or ""
        script = repro_source(minimal, finding, target, model_bytes, limits=limits, version=version)
        (folder / "repro.py").write_text(script, encoding="utf-8")
        if target.sanitizer == "thread":  # repro.py's TSAN_OPTIONS name the copy beside it
            shutil.copyfile(sanitizer.SUPPRESSIONS, folder / SUPPRESSIONS_NAME)
        (folder / "report.md").write_text(render(folder), encoding="utf-8")

    return _written_whole(root, f"{date}-{finding.slug or 'finding'}", fill)


def _written_whole(root: Path, base: str, fill: Callable[[Path], None]) -> Path:
    """A folder `fill` wrote aside, then renamed onto a name claimed with `create_folder`: a
    kill mid-write leaves a temporary folder (`campaign_store.tidy` removes it), never a half
    bundle that --resume would take as done."""
    root.mkdir(parents=True, exist_ok=True)
    # Made with the user's umask (mkdtemp would make it 0700): a bundle is for sharing.
    folder = root / f"{TMP_BUNDLE_PREFIX}{uuid.uuid4().hex}"
    folder.mkdir()
    try:
        fill(folder)
        claim = create_folder(root, base)
        os.rename(folder, claim)  # onto the empty claimed name: POSIX replaces it atomically
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return claim
