"""`racefuzz doctor`'s placement check, in a fresh process: which nodes of each model each
profile's EP takes, from ORT's own record of graph assignment
(`session.record_ep_graph_assignment_info`).

Run as `python -m racefuzz.worker.placement` with a job on stdin (`libraries`, `profiles`,
`models`, as a worker's); prints `{profile: {model: {"eps": {ep: [node, ...]}} | {"error": ..}}}`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from racefuzz.worker.base import Profile
from racefuzz.worker.ops import Runtime


def placement(job: dict[str, Any], register: bool = True) -> dict[str, dict[str, Any]]:
    """`register` False: the job's libraries are registered already (`probe` did it)."""
    profiles = {n: Profile.from_json(n, d) for n, d in job["profiles"].items()}
    runtime = Runtime(job["libraries"], profiles, job["models"], record_placement=True)
    if register:
        runtime.op_register(0, {})
    out: dict[str, dict[str, Any]] = {}
    for profile in profiles:
        for model in job["models"]:
            cell: dict[str, Any]
            try:
                runtime.op_create(0, {"session": "s", "profile": profile, "model": model})
                cell = {"eps": runtime.placement("s")}
                runtime.op_release(0, {"session": "s"})
            except Exception as e:  # reported, not raised: this is a diagnosis
                cell = {"error": f"{type(e).__name__}: {e}"}
            out.setdefault(profile, {})[model] = cell
    return out


if __name__ == "__main__":
    print(json.dumps(placement(json.loads(sys.stdin.read()))))
