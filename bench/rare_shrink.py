"""Shrinking a rare failure: checks sized to the failure's rate against fixed 1-of-3 checks.

The bugs are the pure-Python models of `tests/test_shrink.py` (B3, B8, R1, each with a known
minimal schedule), made to show in 1 run of `1/p`; a seeded fake run, so both arms see the same
coin flips until they choose different candidates. Runs are counted, not timed: a real run's
cost is the EP's. Usage: `python -m bench.rare_shrink [--p 0.125] [--seeds 5]`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from bench.stats import median

MODELS = ("B3", "B8", "R1")


def _arm(models: Any, p: float, seeds: int, fixed: bool) -> list[tuple[bool, int, int]]:
    """(reached the known minimum, final steps, runs) for each model x seed."""
    out = []
    for model in MODELS:
        pattern, expected = models.CASES[model]
        for seed in range(1, seeds + 1):
            kw = {"max_replays": 3} if fixed else {}
            fake = models.Fake(model, p=p, seed=seed)
            result = models.do_shrink(models.noisy(pattern, seed=5), model, fake, **kw)
            if result.measured[0]:  # 0 of 20: nothing to shrink, in either arm
                out.append((result.final == expected, len(result.final.steps), result.calls))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=float, default=0.125, help="a failing schedule's rate")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    models = importlib.import_module("test_shrink")
    print(f"bug shown in {args.p:g} of runs; models {', '.join(MODELS)}; seeds 1..{args.seeds}")
    print("| checks | reached the minimum | median final steps | median runs |")
    print("|:--|--:|--:|--:|")
    for name, fixed in (("sized to the rate (up to 24)", False), ("fixed, 1 of 3", True)):
        rows = _arm(models, args.p, args.seeds, fixed)
        reached = sum(r[0] for r in rows)
        steps = median([float(r[1]) for r in rows])
        runs = median([float(r[2]) for r in rows])
        print(f"| {name} | {reached} of {len(rows)} | {steps:g} | {runs:g} |")


if __name__ == "__main__":
    main()
