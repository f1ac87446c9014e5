"""Schedules as versioned JSON files: encoding (readable, one step per line), decoding with one
line per problem (`ScheduleError` naming the source), and saving whole (a kill never leaves half
a file; `exclusive` saves never overwrite).
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

from racefuzz.atomic_file import write_text
from racefuzz.schedule.contract_rules import LibraryOf
from racefuzz.schedule.model import (
    MAX_STEPS,
    MAX_THREADS,
    OPTIONAL_FIELDS,
    STEP_FIELDS,
    VERSION,
    Op,
    Schedule,
    ScheduleError,
    Step,
    problems,
)


def to_json_obj(schedule: Schedule) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for s in schedule.steps:
        d: dict[str, Any] = {"thread": s.thread, "op": str(s.op)}
        for name in OPTIONAL_FIELDS:
            v = getattr(s, name)
            if v is not None:
                d[name] = v
        if s.group is not None:
            d["group"] = s.group
        if s.jitter_us:
            d["jitter_us"] = s.jitter_us
        if s.dims:
            d["dims"] = list(s.dims)
        steps.append(d)
    obj: dict[str, Any] = {"version": VERSION}
    if schedule.name:
        obj["name"] = schedule.name
    if schedule.description:
        obj["description"] = schedule.description
    obj["threads"] = schedule.threads
    obj["steps"] = steps
    return obj


def dumps(schedule: Schedule) -> str:
    """Readable JSON: one step per line so diffs and hand edits stay easy."""
    obj = to_json_obj(schedule)
    head = {k: v for k, v in obj.items() if k != "steps"}
    lines = [json.dumps(head)[:-1] + ', "steps": [']
    lines += [f"  {json.dumps(s)}," for s in obj["steps"]]
    if obj["steps"]:
        lines[-1] = lines[-1].rstrip(",")
    lines.append("]}")
    return "\n".join(lines) + "\n"


def from_json_obj(
    obj: object, source: str = "schedule", library_of: LibraryOf | None = None
) -> Schedule:
    """Decode and validate (`library_of` as for `problems`: a step of ORT's own EP needs no
    registered library); every problem is a one-line `ScheduleError` naming `source`."""
    if not isinstance(obj, dict):
        raise ScheduleError(f"{source}: expected a JSON object")
    version = obj.get("version")
    if version != VERSION:
        raise ScheduleError(
            f"{source}: unsupported schedule version {version!r} (this racefuzz reads {VERSION})"
        )
    unknown = set(obj) - {"version", "name", "description", "threads", "steps"}
    if unknown:
        raise ScheduleError(f"{source}: unknown field '{sorted(unknown)[0]}'")
    threads = obj.get("threads")
    raw_steps = obj.get("steps")
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise ScheduleError(f"{source}: 'threads' must be an integer")
    if not isinstance(raw_steps, list):
        raise ScheduleError(f"{source}: 'steps' must be a list")
    if len(raw_steps) > MAX_STEPS or threads > MAX_THREADS:
        raise ScheduleError(
            f"{source}: at most {MAX_STEPS} steps on {MAX_THREADS} threads, not "
            f"{len(raw_steps)} on {threads}"
        )
    steps = tuple(_decode_step(raw, f"{source}: step {i}") for i, raw in enumerate(raw_steps))
    name, description = obj.get("name", ""), obj.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise ScheduleError(f"{source}: 'name' and 'description' must be strings")
    schedule = Schedule(threads=threads, steps=steps, name=name, description=description)
    found = problems(schedule, library_of)
    if found:
        raise ScheduleError(f"{source}: {found[0]}")
    return schedule


def _decode_step(raw: object, where: str) -> Step:
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}: expected an object")
    unknown = set(raw) - set(STEP_FIELDS) - set(OPTIONAL_FIELDS)
    if unknown:
        raise ScheduleError(f"{where}: unknown field '{sorted(unknown)[0]}'")
    try:
        op = Op(str(raw.get("op")))
    except ValueError:
        known = ", ".join(o.value for o in Op)
        raise ScheduleError(f"{where}: unknown op {raw.get('op')!r} (one of {known})") from None
    thread, group, jitter = raw.get("thread"), raw.get("group"), raw.get("jitter_us", 0)
    for label, v, optional in (
        ("thread", thread, False),
        ("group", group, True),
        ("jitter_us", jitter, False),
    ):
        if (v is None and optional) or (isinstance(v, int) and not isinstance(v, bool)):
            continue
        raise ScheduleError(f"{where}: '{label}' must be an integer")
    names: dict[str, str | None] = {}
    for name in OPTIONAL_FIELDS:
        v = raw.get(name)
        if v is not None and (not isinstance(v, str) or not v):
            raise ScheduleError(f"{where}: '{name}' must be a non-empty string")
        names[name] = v
    assert isinstance(thread, int) and isinstance(jitter, int)
    dims = raw.get("dims", [])
    if not isinstance(dims, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in dims
    ):
        raise ScheduleError(f"{where}: 'dims' must be a list of integers")
    return Step(thread=thread, op=op, group=group, jitter_us=jitter, dims=tuple(dims), **names)


def loads(text: str, source: str = "schedule") -> Schedule:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{source}: not valid JSON ({e.msg} at line {e.lineno})") from None
    return from_json_obj(obj, source)


def load(path: Path) -> Schedule:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ScheduleError(f"cannot read schedule '{path}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: not a schedule (not UTF-8 text)") from None
    return loads(text, str(path))


def load_many(path: Path) -> list[tuple[Path, Schedule]]:
    """A file, or every `*.json` in a folder (sorted), decoded."""
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise ScheduleError(f"no schedule files (*.json) in '{path}'")
        return [(f, load(f)) for f in files]
    return [(path, load(path))]


def save(schedule: Schedule, path: Path, exclusive: bool = False) -> None:
    """Write a schedule whole: a kill never leaves half of one. `exclusive` fails if the file
    exists (two workers, one name): written aside, then hard-linked into place."""
    if not exclusive:
        write_text(path, dumps(schedule))
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    write_text(tmp, dumps(schedule))
    try:
        os.link(tmp, path)  # atomic and exclusive: FileExistsError if the name is taken
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP):
            raise
        with path.open("x", encoding="utf-8") as f:  # a file system without hard links
            f.write(dumps(schedule))
    finally:
        tmp.unlink(missing_ok=True)
