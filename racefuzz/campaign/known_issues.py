"""Known issues: finding clusters a team has already filed, listed by a campaign but not failing it.

Without them a campaign on an EP with one open bug exits 1 forever, and a regression looks the
same as the bug everyone knows. The file is JSON, one list of clusters per target key, so one
file can serve a CI job that fuzzes several targets:

    {"version": 1, "targets": {"testbed": [
        {"cluster": "zeroed|read|output N: all zeros", "title": "...", "note": "R1"}]}}

The target key is the target's name without its bug switches or flavour (`testbed:B3` and
`testbed[tsan]` read `testbed`'s list): switches change the library's behaviour, not which bugs
are already filed. A cluster key is `Finding.cluster`. `racefuzz run --write-known FILE` adds a
campaign's clusters to the file (kept entries and other targets stay); `--known FILE` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from racefuzz.atomic_file import write_text
from racefuzz.errors import RacefuzzError
from racefuzz.judge.outcome import Finding

VERSION = 1


def target_key(target_name: str) -> str:
    # `testbed[tsan]:B9` reads `testbed`'s list: a sanitizer build is the same EP, so the
    # issues filed against it (R1) are the same; what only a sanitizer sees is a new cluster.
    return target_name.split(":", 1)[0].split("[", 1)[0]


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RacefuzzError(f"cannot read known-issues file '{path}': {e.strerror}") from None
    except (ValueError, UnicodeDecodeError):
        raise RacefuzzError(f"known-issues file '{path}' is not valid JSON") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise RacefuzzError(f"known-issues file '{path}': expected version {VERSION}")
    targets = data.get("targets")
    if not isinstance(targets, dict) or not all(
        isinstance(v, list)
        and all(isinstance(e, dict) and isinstance(e.get("cluster"), str) for e in v)
        for v in targets.values()
    ):
        raise RacefuzzError(
            f"known-issues file '{path}': 'targets' must map names to lists of "
            '{"cluster": "..."} entries'
        )
    return data


def load(path: Path, target_name: str) -> frozenset[str]:
    """The known cluster keys for `target_name` (none listed: an empty set, not an error)."""
    entries = _read(path)["targets"].get(target_key(target_name), [])
    return frozenset(e["cluster"] for e in entries)


def write(path: Path, target_name: str, findings: Iterable[Finding]) -> int:
    """Add the clusters of `findings` to the file under the target's key; returns how many
    were new to it. Misuse findings are not bugs to file and are left out."""
    data: dict[str, Any] = _read(path) if path.exists() else {"version": VERSION, "targets": {}}
    targets: dict[str, list[dict[str, Any]]] = data["targets"]
    entries = targets.setdefault(target_key(target_name), [])
    have = {e["cluster"] for e in entries}
    added = 0
    for f in findings:
        if f.misuse or f.cluster in have:
            continue
        have.add(f.cluster)
        entries.append({"cluster": f.cluster, "title": f"{f.kind} on {f.op}: {f.raw[:100]}"})
        added += 1
    text = json.dumps(data, indent=1) + "\n"
    try:
        write_text(path, text)
    except OSError as e:
        raise RacefuzzError(f"cannot write known-issues file '{path}': {e.strerror}") from None
    return added
