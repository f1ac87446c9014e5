"""How the originals here were made (run by hand, not by the tests).

Per bug: the first schedule of at least 20 steps on at least 3 threads, from a seeded random
walk, whose run shows the bug's symptom. `python tests/data/shrink/find_originals.py`
"""

from __future__ import annotations

import sys
from pathlib import Path

from racefuzz import strategies
from racefuzz.execute import executor
from racefuzz.execute.zygote_pool import ZygoteLauncher
from racefuzz.schedule.json_io import save
from racefuzz.strategies.space import space_for
from racefuzz.targets.registry import load_target

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from test_shrink_testbed import CASES


def main() -> None:
    launcher = ZygoteLauncher()
    for bug, (spec, symptom, _) in sorted(CASES.items()):
        target = load_target(spec)
        walk = strategies.make("random", space_for(target, 26, 4), 11)
        while True:
            s = walk.next_schedule()
            if s is None or len(s.steps) < 20 or len({x.thread for x in s.steps}) < 3:
                continue
            if any(symptom(f) for f in executor.run(target, s, launcher=launcher).findings):  # type: ignore[operator]
                save(s, Path(__file__).with_name(f"{bug}.json"))
                print(bug, len(s.steps), "steps", s.threads, "threads", flush=True)
                break
    launcher.close()


if __name__ == "__main__":
    main()
