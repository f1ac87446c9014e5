"""How a campaign's rate grows with `--jobs`: schedules per second at 1, 4, 8, 16... jobs.

Each point is a real `racefuzz run` subprocess on the fixed testbed with its known-issues file
(R1's clusters are listed, not shrunk, so shrinking does not take job slots from fuzzing), the
same seed, for `--seconds` each. The rate is the campaign's own count over its elapsed time, from
findings.json; "findings" counts clusters that are not known issues: on the fixed testbed each
one would be made by racefuzz itself (a false crash under load, say), so it must stay 0.

Usage: python -m bench.scaling [--jobs 1 4 8 16] [--seconds 30] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent


def campaign(jobs: int, seconds: float, target: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="racefuzz-scaling-") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "racefuzz", "run", "--target", target),
                *("--jobs", str(jobs), "--seconds", str(seconds), "--no-dashboard"),
                *("--known", str(REPO / "testbed" / "known-issues.json"), "--out", out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        busy, parent = _load(proc.pid, 0.3 * seconds, 0.6 * seconds)
        proc.wait()
        wall = time.monotonic() - t0
        (folder,) = [p for p in Path(out).iterdir() if p.is_dir()]
        data = json.loads((folder / "findings.json").read_text())
    new = [f for f in data["findings"] if f.get("verdict") == "new"]
    return {
        "jobs": jobs,
        "schedules": data["schedules"],
        "rate": data["schedules"] / max(data["elapsed_s"], 1e-9),
        "new": len(new),
        "exit": proc.returncode,
        "wall": wall,
        "busy_cores": busy,
        "parent_cores": parent,
    }


def _load(pid: int, after: float, span: float) -> tuple[float, float]:
    """Cores in use machine-wide, and by racefuzz's parent process alone, over a window of the
    campaign: whether a point is bound by the machine or by the parent."""
    time.sleep(after)
    try:
        parent = psutil.Process(pid)
        c0, p0, t0 = psutil.cpu_times(), parent.cpu_times(), time.monotonic()
        time.sleep(span)
        c1, p1, t1 = psutil.cpu_times(), parent.cpu_times(), time.monotonic()
    except psutil.Error:
        return float("nan"), float("nan")
    idle = (c1.idle + getattr(c1, "iowait", 0.0)) - (c0.idle + getattr(c0, "iowait", 0.0))
    total = sum(c1) - sum(c0)
    cores = psutil.cpu_count() or 1
    busy = cores * (1 - idle / total) if total > 0 else float("nan")
    used = (p1.user + p1.system) - (p0.user + p0.system)
    return busy, used / (t1 - t0)


def table(rows: list[dict[str, float]], cores: int, seconds: float, target: str) -> str:
    base = rows[0]["rate"] / rows[0]["jobs"] if rows else 1.0
    lines = [
        f"# Campaign scaling: `{target}`, {seconds:.0f} s per point, {cores} cores",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `python -m bench.scaling`.",
        "",
        "| jobs | schedules | schedules/s | x the 1-job rate | per job | busy cores | parent cores "
        "| new clusters | exit |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['jobs']:.0f} | {r['schedules']:.0f} | {r['rate']:.1f} | "
            f"{r['rate'] / base:.1f} | {r['rate'] / r['jobs']:.1f} | {r['busy_cores']:.1f} | "
            f"{r['parent_cores']:.2f} | {r['new']:.0f} | "
            f"{r['exit']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--target", default="testbed")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for jobs in args.jobs:
        rows.append(campaign(jobs, args.seconds, args.target))
        print(json.dumps(rows[-1]), flush=True)
    text = table(rows, os.cpu_count() or 1, args.seconds, args.target)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
