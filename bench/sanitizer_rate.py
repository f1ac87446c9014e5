"""Sanitizer builds' campaign rate against the plain build's, side by side:
`python -m bench.sanitizer_rate [--rounds 3] [--seconds 20]`.

Each round runs `racefuzz run --target T --seconds S --jobs 1 --no-corpus --no-shrink` for T in
the fixed `testbed`, `testbed[asan]` and `testbed[tsan]`, alternated round by round so that load
falls on each alike; schedules/s from each campaign's findings.json, medians over rounds. With
`--spawn` too: the same without the fast path (every worker a fresh interpreter; the fast path
is the zygote, or for TSan the persistent worker). Then B9 (an unlocked container, a data race
only TSan sees) at `--jobs 2`: seconds to the first `tsan` finding. Issue 28's goals: ASan >=
0.5x and TSan >= 0.3x the plain rate, B9 under TSan within 60 s. Writes
`bench/results/sanitizers.md`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import onnxruntime

from bench.publish import moment, publish

RESULTS = Path(__file__).resolve().parent / "results" / "sanitizers.md"
TARGETS = ("testbed", "testbed[asan]", "testbed[tsan]")


def campaign(target: str, seconds: float, *extra: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            *(sys.executable, "-m", "racefuzz", "run", "--target", target),
            *("--seconds", str(seconds), "--no-corpus", "--no-dashboard", "--out", tmp, *extra),
        ]
        subprocess.run(command, capture_output=True, text=True, check=False)
        (folder,) = Path(tmp).iterdir()
        data: dict[str, Any] = json.loads((folder / "findings.json").read_text())
        return data


def rate(target: str, seconds: float, *extra: str) -> float:
    data = campaign(target, seconds, "--jobs", "1", "--no-shrink", *extra)
    return float(data["schedules"]) / float(data["elapsed_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    started, load = moment()
    rates: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for target in TARGETS:
            for spawn in (False, True):
                key = target + (" (spawned)" if spawn else "")
                extra = ("--spawn",) if spawn else ()
                rates.setdefault(key, []).append(rate(target, args.seconds, *extra))
    medians = {k: statistics.median(v) for k, v in rates.items()}
    plain = medians["testbed"]
    b9 = campaign("testbed[tsan]:B9", 60, "--jobs", "2", "--no-shrink")
    found = [f["first_seen_s"] for f in b9["findings"] if f["kind"] == "tsan"]
    text = [
        "## Campaign rate against the plain build, on each target's fast path",
        "",
        f"Measured {started}, onnxruntime {onnxruntime.__version__}, the 2-core machine, load "
        f"average {load:.1f} at the start; `python -m bench.sanitizer_rate --rounds "
        f"{args.rounds} --seconds {args.seconds:g}`: {args.seconds:g} s campaigns at `--jobs 1`, "
        "corpus and shrinking off, alternated round by round; medians.",
        "",
        "| target | schedules/s (fast path) | vs plain | schedules/s (spawned) "
        "| fast path vs spawned |",
        "|---|---|---|---|---|",
    ]
    for target in TARGETS:
        z, s = medians[target], medians[target + " (spawned)"]
        text.append(
            f"| `{target}` | {z:.2f} | {z / plain:.2f}x | {s:.2f} | {z / max(s, 1e-9):.1f}x |"
        )
    text += [
        "",
        "Goals: ASan at least 0.5x, TSan at least 0.3x the plain build's rate.",
        "",
        "The fast path: the plain and ASan builds fork each worker from a zygote that has "
        "onnxruntime loaded; TSan cannot follow such a fork, so a TSan slot keeps one persistent "
        "worker serving schedules while they end whole (docs/sanitizers.md). Spawned: a fresh "
        "interpreter per schedule (`--spawn`).",
        "",
        "B9 under TSan (`racefuzz run --target 'testbed[tsan]:B9' --seconds 60 --jobs 2 "
        "--no-corpus --no-shrink`): "
        + (f"first `tsan` finding at {min(found):.1f} s" if found else "not found in 60 s")
        + " (goal: within 60 s).",
        "",
    ]
    # Its own section of the results file (the sanitizers' campaigns are recorded above it).
    before = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    kept = before.split(text[0])[0].rstrip()
    return publish(RESULTS, [kept, "", *text] if kept else text)


if __name__ == "__main__":
    sys.exit(main())
