"""The webgpu-cpu races without racefuzz's worker: a plain onnxruntime script.

`run-run`: two sessions of onnxruntime-ep-webgpu (over lavapipe, through racefuzz's forwarding
library, as `racefuzz setup webgpu-cpu` left them) run `tiny` at once from two threads;
`copy-run`: one session runs while another thread reads a device value uploaded before (an
env-level `copy_tensors` to the host), checked byte for byte. A fresh process per trial; a
trial fails when the process dies, a call raises or a copy comes back changed. It shows that what a
webgpu-cpu campaign reports is the EP's own, not racefuzz's harness.

    python -m bench.webgpu_plain_race [--trials 10] [--race run-run|copy-run]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter

TRIAL = r"""
import sys, threading, numpy as np, onnxruntime as ort
from racefuzz.targets.models import model_bytes
race = sys.argv[2]
ort.register_execution_provider_library("webgpu", sys.argv[1])
(device,) = [d for d in ort.get_ep_devices() if d.ep_name == "WebGpuExecutionProvider"]
sessions = []
for _ in range(2 if race == "run-run" else 1):
    so = ort.SessionOptions()
    so.add_provider_for_devices([device], {})
    sessions.append(ort.InferenceSession(model_bytes("tiny"), so))
feeds = [{i.name: np.ones([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
          for i in s.get_inputs()} for s in sessions]
mem = device.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
barrier, errors = threading.Barrier(2), []
def run(k):
    barrier.wait()
    try:
        sessions[k].run(None, feeds[k])
    except Exception as e:
        errors.append(type(e).__name__ + ": " + str(e).splitlines()[-1][-80:])
data = np.arange(1, 65, dtype=np.float32).reshape(4, 16)
value = ort.OrtValue.ortvalue_from_shape_and_type([4, 16], np.float32, memory_info=mem)
ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(data)], [value])  # uploaded before the race
def copy():  # an env-level read of that device value, checked byte for byte
    back = np.zeros_like(data)
    barrier.wait()
    try:
        ort.copy_tensors([value], [ort.OrtValue.ortvalue_from_numpy(back)])
        if not np.array_equal(back, data):
            errors.append("copy round trip: " + ("zeros" if not back.any() else "wrong bytes"))
    except Exception as e:
        errors.append(type(e).__name__ + ": " + str(e).splitlines()[-1][-80:])
jobs = [lambda: run(0), lambda: run(1)] if race == "run-run" else [lambda: run(0), copy]
threads = [threading.Thread(target=j) for j in jobs]
for t in threads: t.start()
for t in threads: t.join()
print("error " + errors[0] if errors else "ok", flush=True)
"""

RACES = {
    "run-run": "two sessions' runs at once",
    "copy-run": "a run and an env-level read of a device value at once",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--race", choices=sorted(RACES), default="run-run")
    args = parser.parse_args()
    from racefuzz.targets.registry import load_target

    target = load_target("webgpu-cpu", None)
    env = {**os.environ, **target.env}
    library = str(target.libraries[0].path)
    outcomes: Counter[str] = Counter()
    for _ in range(args.trials):
        done = subprocess.run(
            [sys.executable, "-c", TRIAL, library, args.race],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = done.stdout.strip().splitlines()[-1:] or [""]
        if done.returncode < 0:
            outcomes[f"killed by signal {-done.returncode}"] += 1
        elif said[0].startswith("error"):
            outcomes[said[0][:100]] += 1
        else:
            outcomes["ok" if said[0] == "ok" else f"exit {done.returncode}"] += 1
    failed = args.trials - outcomes["ok"]
    print(f"webgpu-cpu, {RACES[args.race]}: {failed}/{args.trials} trials failed")
    for what, n in outcomes.most_common():
        print(f"  {n:3d}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
