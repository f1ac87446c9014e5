"""Before anything is fuzzed: does the target's EP library load, and does it provide the EPs and
devices its profiles ask for?

A path to a library that is no EP (libz, say) or a misspelt EP name would otherwise make every
schedule fail and file bogus findings for minutes. `check` answers in one fresh process (loading
a broken library may crash it) and raises one `RacefuzzError` line naming what was found
instead. `probe` is the look inside that `doctor` prints in full.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from racefuzz.errors import RacefuzzError
from racefuzz.targets import models, sanitizer
from racefuzz.targets.model import Target


def probe(target: Target) -> dict[str, Any]:
    """What ORT sees after registering the target's libraries in a fresh process, or
    `{"error": ...}` when that process failed."""
    libraries = {lib.name: str(lib.path) for lib in target.libraries}
    job = json.dumps({"libraries": libraries, "placement": _placement_job(target, libraries)})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "racefuzz.worker.probe"],
            input=job,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **sanitizer.merged(target.env, target.sanitizer)},
        )
    except subprocess.TimeoutExpired:
        return {"error": "loading the EP libraries did not finish within 120 s"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"probe process failed (exit {proc.returncode}): {tail}"}
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _placement_job(target: Target, libraries: dict[str, str]) -> dict[str, Any] | None:
    """What `worker.placement` needs: every plugin profile with every model of the target."""
    plugins = {p.name: p.to_json() for p in target.profiles if p.library is not None}
    if not plugins:
        return None  # ORT's own EPs take every node they can run
    paths = {m: str(models.model_path(m)) for m in target.models}
    return {"libraries": libraries, "profiles": plugins, "models": paths}


def on_ep(target: Target, seen: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    """(nodes the profile's own EP took, nodes in all) per (profile, model) the probe placed;
    a pair whose session could not be created is left out."""
    out = {}
    for profile, cells in dict(seen.get("placement") or {}).items():
        ep = target.profile(profile).ep_name
        for model, cell in cells.items():
            eps: dict[str, list[str]] = cell.get("eps") or {}
            if "error" not in cell:
                out[(profile, model)] = (len(eps.get(ep, [])), sum(map(len, eps.values())))
    return out


def placement_warnings(target: Target, seen: dict[str, Any]) -> list[str]:
    """One line per profile and model its EP computes nothing of: a campaign there tests
    whichever EP ORT fell back to (its CPU EP), not the one under test."""
    idle = [(p, m) for (p, m), (mine, _) in on_ep(target, seen).items() if mine == 0]
    return [
        f"profile '{p}' runs no node of model '{m}' on its EP '{target.profile(p).ep_name}' "
        "(ORT placed them all elsewhere; `racefuzz doctor` shows where)"
        for p, m in idle
    ]


def problems(target: Target, seen: dict[str, Any]) -> list[str]:
    """Why the target cannot be fuzzed as configured, one line each; [] when it can."""
    if "error" in seen:
        names = ", ".join(f"'{lib.path}'" for lib in target.libraries) or "no library"
        return [f"target '{target.name}': loading {names} failed: {seen['error']}"]
    out: list[str] = []
    for lib in target.libraries:
        state = seen["libraries"].get(lib.name, "not tried")
        if state != "registered":
            out.append(f"cannot register EP library '{lib.name}' ({lib.path}): {state}")
    if out:
        return out
    devices: list[dict[str, Any]] = seen["devices"]
    providers: list[str] = seen.get("providers", [])
    for p in target.profiles:
        if p.library is None and p.ep_name in providers:
            continue  # one of ORT's own EPs: no EP device needed
        eps = [d for d in devices if d["ep_name"] == p.ep_name]
        if not eps:
            offered = sorted({d["ep_name"] for d in devices if d["ep_name"] not in providers})
            where = f"library '{p.library}'" if p.library else "onnxruntime"
            found = ", ".join(offered) or "none"
            out.append(
                f"profile '{p.name}' asks for EP '{p.ep_name}', but {where} provides: {found}"
            )
            continue
        if p.device_type and not any(d["device_type"] == p.device_type.lower() for d in eps):
            kinds = ", ".join(sorted({d["device_type"] for d in eps}))
            out.append(
                f"profile '{p.name}': EP '{p.ep_name}' has no {p.device_type} device ({kinds})"
            )
        elif p.vendor_id is not None and not any(d["vendor_id"] == p.vendor_id for d in eps):
            ids = ", ".join(sorted({hex(d["vendor_id"]) for d in eps}))
            out.append(
                f"profile '{p.name}': EP '{p.ep_name}' has no device of vendor "
                f"{hex(p.vendor_id)} ({ids})"
            )
    placed = on_ep(target, seen)
    for p in target.profiles:
        mine = [placed[(p.name, m)][0] for m in target.models if (p.name, m) in placed]
        if mine and not any(mine):
            out.append(
                f"profile '{p.name}': EP '{p.ep_name}' runs no node of any model of the target "
                f"({', '.join(target.models)}); give it a model it computes (`models` in "
                "racefuzz.toml), or see why with session_config = "
                '{ "session.disable_cpu_ep_fallback" = "1" }'
            )
    return out


def check(target: Target) -> list[str]:
    """Raise the first problem as one line (exit 2 through the CLI); return the warnings
    (profile and model pairs the EP computes nothing of)."""
    seen = probe(target)
    found = problems(target, seen)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise RacefuzzError(found[0] + more)
    return placement_warnings(target, seen)
