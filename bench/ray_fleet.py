"""A Ray fleet against local job slots, and how many results one driver can take in:
`python -m bench.ray_fleet [--rounds 5] [--seconds 60]`.

Rate: one Ray node with 2 CPUs (`ray.cluster_utils.Cluster` on this machine) against the local
executor, the same `racefuzz run --target testbed --jobs 2 --no-corpus --no-shrink` campaign,
alternated round by round; schedules/s from each campaign's findings.json, medians. Issue 30's
goal: Ray at least 0.8x local.

Ingest: what one driver spends per result, in two parts measured apart. The campaign's part:
drawing the next schedule and recording a judged result (`Campaign._record`) in a loop over real
testbed results, in this process. Ray's part: canned results returned by actors as fast as
driver threads can ask for them (the path `fleet.pool` takes), with the driver's CPU time. From
their sum: the results/s one driver core takes in, and the fleet that is.
Writes `bench/results/ray.md`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime
import psutil
import ray
from ray.cluster_utils import Cluster

from bench.publish import moment, publish
from racefuzz.campaign.config import CampaignConfig
from racefuzz.campaign.loop import Campaign
from racefuzz.execute import executor
from racefuzz.execute.executor import RunOptions
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule
from racefuzz.targets.registry import load_target

RESULTS = Path(__file__).resolve().parent / "results" / "ray.md"
FLEET = (100, 8, 3.0)  # hosts, GPUs each, schedules/s per GPU: the fleet the issue names


def campaign_rate(seconds: float, jobs: int, *extra: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            *(sys.executable, "-m", "racefuzz", "run", "--target", "testbed", "--jobs", str(jobs)),
            *("--seconds", str(seconds), "--no-corpus", "--no-shrink", "--no-dashboard"),
            *("--out", tmp, *extra),
        ]
        subprocess.run(command, capture_output=True, text=True, check=False)
        (folder,) = Path(tmp).iterdir()
        data: dict[str, Any] = json.loads((folder / "findings.json").read_text())
        return float(data["schedules"]) / float(data["elapsed_s"])


def real_results(n: int) -> list[RunResult]:
    """Judged runs of the fixed testbed, of schedules the portfolio drew."""
    target = load_target("testbed")
    with tempfile.TemporaryDirectory() as tmp:
        drawn = Campaign(target, CampaignConfig(seconds=1, jobs=1, seed=1), Path(tmp))
        schedules = [drawn.strategy.next_schedule() for _ in range(n)]
    return [executor.run(target, s, RunOptions()) for s in schedules if s is not None]


def campaign_cost(results: list[RunResult], seconds: float) -> tuple[float, float, float]:
    """CPU seconds per result of drawing the next schedule and of recording a result, and the
    share of results that failed (members of clusters once the first of each was recorded)."""
    target = load_target("testbed")
    with tempfile.TemporaryDirectory() as tmp:
        camp = Campaign(target, CampaignConfig(seconds=seconds, jobs=1, seed=2), Path(tmp))
        for r in results:  # every cluster opened: from here on what a long campaign sees
            camp._record(r, "bench")
        drawn = _cpu_per_call(lambda: camp.strategy.next_schedule(), seconds / 2)
        recorded = _cpu_per_call(lambda: _record_all(camp, results), seconds / 2)
    return drawn, recorded / len(results), sum(r.failed for r in results) / len(results)


def _record_all(camp: Campaign, results: list[RunResult]) -> None:
    for r in results:
        camp._record(r, "bench")


def _cpu_per_call(call: Callable[[], object], seconds: float) -> float:
    me = psutil.Process()
    before, n, end = me.cpu_times(), 0, time.monotonic() + seconds
    while time.monotonic() < end:
        call()
        n += 1
    after = me.cpu_times()
    cpu: float = (after.user - before.user) + (after.system - before.system)
    return cpu / n


@ray.remote(num_cpus=1, max_concurrency=4)  # type: ignore[call-overload]
class Canned:
    """An actor that answers `run` at once with one stored result, as a node slot would."""

    def __init__(self, result: RunResult) -> None:
        self.result = result

    def run(self, schedule: Schedule, options: RunOptions) -> RunResult:
        return self.result


def ray_cost(result: RunResult, seconds: float, threads: int) -> tuple[float, float]:
    """Results/s and driver CPU seconds per result, fetching canned results like the fleet."""
    actors = [Canned.remote(result) for _ in range(2)]  # type: ignore[attr-defined]
    ray.get([a.run.remote(result.schedule, RunOptions()) for a in actors])  # started
    counts = [0] * threads
    end = time.monotonic() + seconds

    def fetch(i: int) -> None:
        actor = actors[i % len(actors)]
        while time.monotonic() < end:
            ray.get(actor.run.remote(result.schedule, RunOptions()))
            counts[i] += 1

    me = psutil.Process()
    before, t0 = me.cpu_times(), time.monotonic()
    workers = [threading.Thread(target=fetch, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall, after = time.monotonic() - t0, me.cpu_times()
    for a in actors:
        ray.kill(a)
    cpu = (after.user - before.user) + (after.system - before.system)
    return sum(counts) / wall, cpu / max(sum(counts), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--ingest-seconds", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=2, help="local jobs, and the Ray node's CPUs")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    args = ap.parse_args(argv)
    started, load = moment()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.jobs})
    rates: dict[str, list[float]] = {"local": [], "ray": []}
    try:
        for _ in range(args.rounds):
            rates["local"].append(campaign_rate(args.seconds, args.jobs))
            rates["ray"].append(campaign_rate(args.seconds, args.jobs, "--ray", cluster.address))
        results = real_results(40)
        drawn, recorded, failed = campaign_cost(results, args.ingest_seconds)
        ray.init(address=cluster.address, log_to_driver=False)
        fetched, ray_cpu = ray_cost(results[0], args.ingest_seconds, threads=8)
        ray.shutdown()
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
    local, remote = statistics.median(rates["local"]), statistics.median(rates["ray"])
    per_result = drawn + recorded
    total = per_result + ray_cpu
    hosts, gpus, each = FLEET
    fleet_rate = hosts * gpus * each
    text = [
        "# A Ray fleet: its rate against local job slots, and one driver's ingest",
        "",
        f"Measured {started}, onnxruntime {onnxruntime.__version__}, Ray {ray.__version__}, "
        f"{psutil.cpu_count()} cores, load average {load:.1f} at the start; `python -m "
        f"bench.ray_fleet --rounds {args.rounds} --seconds {args.seconds:g} --jobs {args.jobs}`.",
        "",
        f"## Rate: one Ray node with {args.jobs} slots against `--jobs {args.jobs}` on this "
        "machine",
        "",
        f"The same `racefuzz run --target testbed --jobs {args.jobs} --seconds "
        f"{args.seconds:g} --no-corpus --no-shrink` campaign, alternated round by round, the "
        f"Ray node a `ray.cluster_utils.Cluster` head with {args.jobs} CPUs on this machine "
        "(started once, idle during the local rounds).",
        "",
        "| executor | schedules/s, each round | median |",
        "|---|---|---|",
        f"| local | {', '.join(f'{r:.1f}' for r in rates['local'])} | {local:.1f} |",
        f"| Ray | {', '.join(f'{r:.1f}' for r in rates['ray'])} | {remote:.1f} |",
        "",
        f"Ray against local: **{remote / local:.2f}x** (goal: "
        + ("at least 0.8x)." if args.jobs <= 2 else "at least 1.2x on the GPU host's 16 cores)."),
        "",
        "## Ingest: what one driver spends per result",
        "",
        f"- The campaign's part: **{per_result * 1e3:.2f} ms of CPU per result**. Drawing the "
        f"next schedule (the portfolio, every candidate step checked against the rules): "
        f"{drawn * 1e3:.2f} ms. Recording a judged result (`Campaign._record`: the portfolio's "
        f"`observe`, clusters) over {len(results)} real results of the fixed testbed "
        f"({failed:.0%} of them failing, as members of clusters already open): "
        f"{recorded * 1e3:.2f} ms.",
        f"- Ray's part (a result fetched from an actor: the call, the transfer, unpickling), "
        f"8 driver threads against 2 actors returning a stored result: {fetched:.0f} results/s "
        f"on this machine, **{ray_cpu * 1e3:.2f} ms of driver CPU per result**. The actors "
        "share the machine's cores with the driver, so this rate is a floor.",
        f"- Together: {total * 1e3:.2f} ms per result, so one driver core takes in about "
        f"**{1 / total:.0f} results/s**; at 1000 results/s a driver needs "
        f"{total * 1000:.1f} cores.",
        f"- A fleet of {hosts} hosts x {gpus} GPUs x {each:g} schedules/s is "
        f"{fleet_rate:.0f} results/s: {fleet_rate * total:.1f} driver cores. One driver "
        "(one Python process: its threads share one interpreter lock, about one core) feeds "
        f"about {1 / total / (gpus * each):.0f} such hosts.",
        "",
        "Past that the driver is the limit, and drawing schedules is nearly all of its cost: "
        "judging is done on the nodes, and recording a result is cheap. What would shard it: "
        "drawing moved to the nodes (each node slot runs its own copy of the strategy, seeded "
        "apart, and sends back its results, which the driver only records and feeds to a "
        "corpus the slots share), or several drivers, each a campaign over a share of the "
        "nodes with its own seed, whose folders are merged after.",
        "",
    ]
    return publish(args.results, text)


if __name__ == "__main__":
    sys.exit(main())
