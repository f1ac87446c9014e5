"""A target as a `racefuzz.toml` table, so that a bundle of a config-defined target replays with
`racefuzz replay schedule.json --config racefuzz.toml --target NAME` on its own.

Written from the resolved `Target` (absolute library and model paths), not copied from the
user's file, whose relative paths would not survive the move into the bundle. `load_target`
reads it back to an equal target.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from racefuzz.targets import layer
from racefuzz.targets.model import Library, Target


def _str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def _table(values: Mapping[str, object]) -> str:
    cells = ", ".join(f"{_str(k)} = {_value(v)}" for k, v in values.items())
    return "{ " + cells + " }" if cells else "{}"


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return _str(str(v))


def _library(lib: Library) -> str:
    if lib.sanitizer is None:
        return _str(str(lib.path))
    return _table({"path": str(lib.path), "sanitizer": lib.sanitizer})


def target_toml(target: Target) -> str:
    layered = target.layer
    if layered:  # written as the target behind it, and `layer = true` to put it back
        name = target.name
        target = replace(layer.unwrap(target), name=name)
    head = f"targets.{_str(target.name)}"
    lines = [
        "# Written by racefuzz from the target this bundle was found on.",
        f"[{head}]",
        f"description = {_str(target.description)}",
        f"models = [{', '.join(_str(m) for m in target.models)}]",
        f"env = {_table(target.env)}",
        f"trace = {_value(target.trace)}",
        *(
            [f"tolerance = {{ rtol = {target.tolerance[0]!r}, atol = {target.tolerance[1]!r} }}"]
            if target.tolerance
            else []
        ),
        *([f"cluster_by = {_str(target.cluster_by)}"] if target.cluster_by != "symptom" else []),
        *(["layer = true"] if layered else []),
        *([f"backend_option = {_str(target.backend_option)}"] if target.backend_option else []),
        "",
        f"[{head}.libraries]",
        *(f"{_str(lib.name)} = {_library(lib)}" for lib in target.libraries),
    ]
    for p in target.profiles:
        lines += ["", f"[{head}.profiles.{_str(p.name)}]", f"ep = {_str(p.ep_name)}"]
        if p.library is not None:
            lines.append(f"library = {_str(p.library)}")
        if p.device_type is not None:
            lines.append(f"device = {_str(p.device_type)}")
        if p.vendor_id is not None:
            lines.append(f"vendor_id = {p.vendor_id}")
        if p.intra_op_threads is not None:
            lines.append(f"intra_op_threads = {p.intra_op_threads}")
        for k, v in p.to_json().items():
            if k in ("device_index", "thread_pools", "execution_mode", "inter_op_threads"):
                lines.append(f"{k} = {_str(v) if isinstance(v, str) else v}")
        lines.append(f"options = {_table(p.provider_options)}")
        lines.append(f"session_config = {_table(p.session_config)}")
    if target.aliases:
        lines += ["", f"[{head}.aliases]"]
        lines += [f"{_str(k)} = {_str(v)}" for k, v in target.aliases.items()]
    return "\n".join(lines) + "\n"
