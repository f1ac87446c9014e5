"""Does campaign time go to finding while clusters shrink and hangs are replayed?
`python -m bench.campaign_windows [--seconds 300] [--jobs N] [--fault hang:mgx] [--target T]`.

Runs one campaign (default: `testbed:B3` with `RACEFUZZ_TESTBED_FAULT=hang:mgx`, every Compute
on the mgx backend hanging, the corpus off) and counts the schedules it ran in each 30 s window
from its progress lines. Issue 28's goal: no window below half of the first one's, and every
cluster shrunk or honestly "time is up". Writes `bench/results/campaign_time.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import onnxruntime

from bench.publish import moment, publish

RESULTS = Path(__file__).resolve().parent / "results" / "campaign_time.md"
WINDOW_S = 30.0
PROGRESS = re.compile(r"^\[\s*([\d.]+)s\] (\d+) schedules")


def windows(lines: list[str], seconds: float) -> list[int]:
    """Schedules per WINDOW_S window, read off the progress lines (every 10 s) and the total."""
    points = [(0.0, 0)]
    for line in lines:
        if m := PROGRESS.match(line):
            points.append((float(m.group(1)), int(m.group(2))))
    out = []
    for k in range(1, int(seconds // WINDOW_S) + 1):
        end = k * WINDOW_S
        before = [n for t, n in points if t <= end - WINDOW_S + 1]
        upto = [n for t, n in points if t <= end + 1]
        out.append(upto[-1] - before[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="testbed:B3")
    ap.add_argument("--fault", default="hang:mgx", help="RACEFUZZ_TESTBED_FAULT ('' for none)")
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    env = dict(os.environ, RACEFUZZ_TESTBED_FAULT=args.fault)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            *(sys.executable, "-m", "racefuzz", "run", "--target", args.target),
            *("--seconds", str(args.seconds), "--jobs", str(args.jobs), "--no-corpus"),
            *("--no-dashboard", "--out", tmp),
        ]
        started, load = moment()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        lines = done.stdout.splitlines() + done.stderr.splitlines()
        (campaign,) = Path(tmp).iterdir()
        summary = json.loads((campaign / "findings.json").read_text())
    counts = windows(lines, args.seconds)
    low = min(counts[1:], default=counts[0]) / max(counts[0], 1)
    states = [(f["kind"], f["op"], f["state"]) for f in summary["findings"]]
    text = [
        "# Campaign time while clusters shrink and hangs replay",
        "",
        f"Measured {started}, onnxruntime {onnxruntime.__version__}, load average {load:.1f} at "
        f"the start, `RACEFUZZ_TESTBED_FAULT={args.fault} python -m racefuzz run --target "
        f"{args.target} --seconds {args.seconds:.0f} --jobs {args.jobs} --no-corpus` "
        f"(`python -m bench.campaign_windows`).",
        "",
        f"Schedules per {WINDOW_S:.0f} s window: {', '.join(map(str, counts))}; the lowest "
        f"after the first is {low:.2f}x the first (goal: at least 0.5x). "
        f"{summary['schedules']} schedules in all.",
        "",
        "| kind | op | state |",
        "|---|---|---|",
        *(f"| {k} | {o} | {s} |" for k, o, s in states),
        "",
    ]
    return publish(RESULTS, text)


if __name__ == "__main__":
    sys.exit(main())
