"""What racefuzz's EP-ABI layer costs: `python -m bench.layer_overhead [--rounds N]`.

Two measurements, each with and without the layer, alternated round by round so that load on a
shared machine falls on both alike, medians quoted:

- per call: one process registers the fixed testbed (directly, or behind the layer), creates a
  `dml` session of model `tiny` and a device value, then times N env-level copies (host to
  device: `copy_tensors`, the registration-time DataTransfer) and N runs (a Compute through
  the node compute info); microseconds per call;
- per campaign: `racefuzz run --target testbed[ or testbed[layer]] --seconds S --no-corpus
  --no-shrink --jobs 1`, schedules per second from its findings.json.

Writes `bench/results/layer.md`. The issue's goal: a campaign with the layer at >= 0.7x the
schedules/s of one without.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from racefuzz.targets import models
from racefuzz.targets.registry import load_target

RESULTS = Path(__file__).resolve().parent / "results" / "layer.md"

CHILD = """
import json, os, sys, time
import numpy as np, onnxruntime as ort
calls, library, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ort.register_execution_provider_library("testbed", library)
dev = next(d for d in ort.get_ep_devices() if d.ep_name == "RacefuzzTestbed")
so = ort.SessionOptions()
so.add_provider_for_devices([dev], {"profile": "dml"})
sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
shape = lambda i: [d if isinstance(d, int) else 1 for d in i.shape]
feed = {i.name: np.random.rand(*shape(i)).astype(np.float32) for i in sess.get_inputs()}
x = next(iter(feed.values()))
mem = dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
val = ort.OrtValue.ortvalue_from_shape_and_type(list(x.shape), np.float32, memory_info=mem)
src = [ort.OrtValue.ortvalue_from_numpy(x)]
for _ in range(20):
    ort.copy_tensors(src, [val]); sess.run(None, feed)
t0 = time.perf_counter()
for _ in range(calls):
    ort.copy_tensors(src, [val])
t1 = time.perf_counter()
for _ in range(calls):
    sess.run(None, feed)
t2 = time.perf_counter()
print(json.dumps({"copy_us": (t1 - t0) / calls * 1e6, "run_us": (t2 - t1) / calls * 1e6}))
"""


def per_call(spec: str, calls: int) -> dict[str, float]:
    target = load_target(spec)
    lib = target.libraries[0]
    env = {**__import__("os").environ, **target.env}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(calls), str(lib.path), str(models.model_path("tiny"))],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def campaign(spec: str, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [
                *(sys.executable, "-m", "racefuzz", "run", "--target", spec),
                *("--seconds", str(seconds), "--no-corpus", "--no-shrink", "--no-dashboard"),
                *("--jobs", "1", "--out", out),
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 300,
        )
        (folder,) = list(Path(out).iterdir())
        data = json.loads((folder / "findings.json").read_text())
        return float(data["schedules"]) / float(data["elapsed_s"])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.layer_overhead")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args(argv)
    specs = ("testbed", "testbed[layer]")
    calls: dict[str, list[dict[str, float]]] = {s: [] for s in specs}
    rates: dict[str, list[float]] = {s: [] for s in specs}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(args.rounds):
        for spec in specs if r % 2 == 0 else specs[::-1]:
            calls[spec].append(per_call(spec, args.calls))
            rates[spec].append(campaign(spec, args.seconds))
            print(f"round {r + 1} {spec}: {calls[spec][-1]} {rates[spec][-1]:.2f}/s", flush=True)

    def med(spec: str, key: str) -> float:
        return statistics.median(c[key] for c in calls[spec])

    plain, layered = (statistics.median(rates[s]) for s in specs)
    import onnxruntime

    lines = [
        "# The EP-ABI layer's cost",
        "",
        f"Measured {started}, onnxruntime {onnxruntime.__version__}, "
        f"`python -m bench.layer_overhead --rounds {args.rounds} --calls {args.calls} "
        f"--seconds {args.seconds:g}`; medians of {args.rounds} alternated rounds.",
        "",
        "| | testbed | testbed[layer] | cost |",
        "|---|---|---|---|",
    ]
    for key, what in (("copy_us", "env-level copy (µs)"), ("run_us", "run of `tiny` (µs)")):
        a, b = med("testbed", key), med("testbed[layer]", key)
        lines.append(f"| {what} | {a:.1f} | {b:.1f} | {b - a:+.1f} µs ({b / a:.2f}x) |")
    lines.append(
        f"| campaign, schedules/s | {plain:.2f} | {layered:.2f} | {layered / plain:.2f}x "
        "(goal >= 0.7x) |"
    )
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
