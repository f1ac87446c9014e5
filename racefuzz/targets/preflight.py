"""Before anything is fuzzed: does the target's EP library load, and does it provide the EPs and
devices its profiles ask for?

A path to a library that is no EP (libz, say) or a misspelt EP name would otherwise make every
schedule fail and file bogus findings for minutes. `check` answers in one fresh process (loading
a broken library may crash it) and raises one `RacefuzzError` line naming what was found
instead. `probe` is the look inside that `doctor` prints in full.

Only a library that cannot be registered, or shows no device for a profile, is bad input. A probe
that registered its libraries and then died by a signal or hung while making its own calls
(`probe_schedule`: create and release a session of each profile and model, then unregister) has
found a bug in the EP: `died` says so, and `racefuzz run` files that schedule as a finding
(`cli.preflight_finding`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.json_io import to_json_obj
from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.targets import models, sanitizer
from racefuzz.targets.model import Target

PROBE_TIMEOUT_S = 120
PROBE_SCHEDULE = "preflight-probe"
# What the last `probe` of each target saw, by target name: `died` reads it for `racefuzz run`.
_seen: dict[str, dict[str, Any]] = {}


def probe_schedule(target: Target) -> Schedule:
    """The probe's own calls in order: register every library, create and release a session of
    each plugin profile with each model, unregister."""
    steps = [Step(0, Op.REGISTER)]
    plugins = [p.name for p in target.profiles if p.library is not None]
    for n, (profile, model) in enumerate(((p, m) for p in plugins for m in target.models), 1):
        steps.append(make_step(Op.CREATE, 0, session=f"s{n}", profile=profile, model=model))
        steps.append(make_step(Op.RELEASE, 0, session=f"s{n}"))
    steps.append(Step(0, Op.UNREGISTER))
    what = "register, create and release a session of each profile and model, unregister"
    return Schedule(1, tuple(steps), PROBE_SCHEDULE, description=f"racefuzz's preflight: {what}")


def probe(target: Target) -> dict[str, Any]:
    """What ORT sees after registering the target's libraries in a fresh process, or
    `{"error": ...}` when that process failed before they were registered; `"died"` tells of
    one that died by a signal or hung after."""
    libraries = {lib.name: str(lib.path) for lib in target.libraries}
    schedule = probe_schedule(target)
    job = json.dumps({"libraries": libraries, "schedule": _job(target, schedule)})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "racefuzz.worker.probe"],
            input=job,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={**os.environ, **sanitizer.merged(target.env, target.sanitizer)},
        )
        code: int | None = proc.returncode
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:  # what it printed so far says how far it got
        code, out, err = None, _text(e.stdout), _text(e.stderr)
    seen = _read(out, code, err, schedule)
    _seen[target.name] = seen
    return seen


def _job(target: Target, schedule: Schedule) -> dict[str, Any] | None:
    """What the probe needs for the steps after registering: profiles, models, steps."""
    if not target.libraries:
        return None  # ORT's own EPs: nothing to register, and they take every node they can
    plugins = {p.name: p.to_json() for p in target.profiles if p.library is not None}
    paths = {m: str(models.model_path(m)) for m in schedule.models()}
    return {"profiles": plugins, "models": paths, "steps": to_json_obj(schedule)["steps"]}


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def _read(out: str, code: int | None, err: str, schedule: Schedule) -> dict[str, Any]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = next((line["result"] for line in lines if "result" in line), None)
    if code == 0 and result is not None:
        found: dict[str, Any] = result
        return found
    registered = next((line["registered"] for line in lines if "registered" in line), None)
    tail = (err.strip().splitlines() or ["no output"])[-1]
    if registered is None or not (code is None or _by_signal(code)):
        # Before its libraries were registered (or not by a signal: racefuzz's own probe
        # failing is no finding): the library cannot be used at all.
        if code is None:
            return {"error": f"loading the EP libraries did not finish within {PROBE_TIMEOUT_S} s"}
        return {"error": f"probe process failed (exit {code}): {tail}"}
    # In flight when it died: the last step begun; after its result, its teardown.
    last = len(schedule.steps) - 1
    step = (
        last if result is not None else max((ln["step"] for ln in lines if "step" in ln), default=0)
    )
    how = f"hung (no result within {PROBE_TIMEOUT_S} s)" if code is None else _death(code)
    died = {"how": how, "step": step, "during": schedule.steps[step].describe(), "tail": tail}
    return {**registered, "died": died}


def _by_signal(code: int) -> bool:
    # POSIX: minus the signal; Windows: an NTSTATUS exception code (0xC0000005 access violation).
    return code < 0 or code >= 0xC0000000


def _death(code: int) -> str:
    if code >= 0xC0000000:
        return f"died (exception 0x{code:08X})"
    try:
        return f"died by {signal.Signals(-code).name}"
    except ValueError:
        return f"died by signal {-code}"


def died(target: Target) -> dict[str, Any] | None:
    """How the last probe of `target` died after registering (`how`, `step` in flight of
    `probe_schedule`, `during`, `tail`), or None when it did not."""
    death: dict[str, Any] | None = _seen.get(target.name, {}).get("died")
    return death


def death_warning(seen: dict[str, Any]) -> list[str]:
    d = seen.get("died")
    if d is None:
        return []
    return [
        f"the preflight probe {d['how']} after registering, in step {d['step']} "
        f"({d['during']}): `racefuzz run` reports its calls as a finding"
    ]


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
    whichever EP ORT fell back to (its CPU EP), not the one under test; and one for a probe
    that died after registering."""
    idle = [(p, m) for (p, m), (mine, _) in on_ep(target, seen).items() if mine == 0]
    return death_warning(seen) + [
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
    if out:
        return out  # no EP or device: its creates failing says nothing more
    out += never_creates(target, seen)
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


def never_creates(target: Target, seen: dict[str, Any]) -> list[str]:
    """One line per profile whose session the probe could create with none of the target's
    models: every schedule would fail at its first create, and a campaign would file that as
    clusters that "fail alone" instead of saying the profile is misconfigured."""
    out = []
    for profile, cells in dict(seen.get("placement") or {}).items():
        errors = [cell["error"] for cell in cells.values() if "error" in cell]
        if cells and len(errors) == len(cells):
            first = errors[0].strip().splitlines()[0] if errors[0].strip() else "no message"
            out.append(
                f"profile '{profile}' cannot create a session with any model of the target "
                f"({', '.join(cells)}): {first}"
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
