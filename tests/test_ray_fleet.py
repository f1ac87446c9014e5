"""`racefuzz run --ray` on a real three-node Ray cluster started on this machine (one CPU each,
`ray.cluster_utils.Cluster`): the campaign finds, shrinks and bundles across nodes, survives a
node removed mid-campaign, and leaves no process behind on any node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from racefuzz.campaign.state import where_seen
from racefuzz.fleet.node_slot import NODE_ENV

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")
RUN = [sys.executable, "-m", "racefuzz", "run"]


def _left_on(node_ids: set[str]) -> list[str]:
    """racefuzz's processes (actors, zygotes, workers) started on these nodes and still alive."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.environ().get(NODE_ENV) in node_ids and proc.status() != "zombie":
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:80]}")
        except psutil.Error:
            continue
    return found


def _gone_within(node_ids: set[str], seconds: float) -> list[str]:
    end = time.monotonic() + seconds
    while (left := _left_on(node_ids)) and time.monotonic() < end:
        time.sleep(0.5)
    return left


@pytest.fixture(scope="module")
def cluster(testbed_library: Path) -> Iterator[Any]:
    c = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=0)  # nothing to run a slot on: left out, with one line
    c.racefuzz_slotted = [c.add_node(num_cpus=1) for _ in range(2)]  # for a test to remove
    c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()


def _ids(c: Any) -> set[str]:
    return {str(n.node_id) for n in c.list_all_nodes()}


def _start(c: Any, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *RUN,
            "--ray",
            c.address,
            "--target",
            "testbed:B3",
            *("--no-dashboard", "--out", str(out)),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _shrunk(folder: Path) -> list[dict[str, Any]]:
    """The clusters shrunk to B3's 4-step story, with their bundles."""
    data = json.loads((folder / "findings.json").read_text())
    return [f for f in data["findings"] if f["bundle"] and f["minimal_steps"] == 4]


def _folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


@pytest.mark.slow
def test_b3_is_found_and_shrunk_across_three_nodes(cluster: Any, tmp_path: Path) -> None:
    # Its replays two at a time, on two nodes: a shrink spread over the fleet.
    proc = _start(cluster, tmp_path, "--seconds", "40", "--shrink-parallel", "2")
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, log
    assert log.count("racefuzz: Ray node ") == 4, log  # every node, kept or left out
    assert log.count(": 1 slot(s), cpu: ") == 3 and "left out: no free CPU" in log, log
    folder = _folder(tmp_path)
    if not _shrunk(folder):
        # A shrink takes about 18 s here beside fuzzing, once in 7 runs past the end: what
        # the last line then tells the user, over the fleet as well (and --resume keeps --ray).
        again = [*RUN, "--resume", str(folder), "--shrink-only", "--seconds", "60"]
        done = subprocess.run(again, capture_output=True, text=True, timeout=300)
        assert done.stdout.count(": 1 slot(s)") == 3, done.stdout
        log += done.stdout
    data = json.loads((folder / "findings.json").read_text())
    shrunk = _shrunk(folder)
    assert shrunk, log  # B3's story: two sessions, a bound input, two runs
    bundle = folder / shrunk[0]["bundle"]
    env = json.loads((bundle / "env.json").read_text())
    node = env["ray"]["node"]
    assert node.split("/")[1] in {i[:8] for i in _ids(cluster)}, env["ray"]
    assert f"Ray node: {node}" in (bundle / "report.md").read_text()
    assert shrunk[0]["nodes"] and shrunk[0]["where"].startswith(f"{len(shrunk[0]['nodes'])} node")
    assert data["lost"] == 0
    # --resume keeps the campaign's cluster, as it keeps its other options.
    again = subprocess.run(
        [
            *RUN,
            "--resume",
            str(_folder(tmp_path)),
            "--seconds",
            "5",
            "--no-shrink",
            "--no-dashboard",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 1 and again.stdout.count(": 1 slot(s)") == 3, again.stdout


@pytest.mark.slow
def test_a_node_removed_mid_campaign_costs_runs_never_findings(
    cluster: Any, tmp_path: Path
) -> None:
    victim = cluster.racefuzz_slotted.pop()  # one with a slot, not the head
    proc = _start(cluster, tmp_path, "--seconds", "40", "--no-shrink")
    time.sleep(15)
    cluster.remove_node(victim, allow_graceful=False)
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, log
    data = json.loads((_folder(tmp_path) / "findings.json").read_text())
    assert data["lost"] > 0, log
    assert (
        "run(s) lost with Ray nodes" in log
        and "lost with fleet nodes" in (_folder(tmp_path) / "summary.md").read_text()
    )
    # The node's killed workers are no crash, hang or kill of the EP: no finding says so.
    summary = (_folder(tmp_path) / "summary.md").read_text()
    assert "0 worker crashes, 0 hangs" in summary, summary
    assert not [f for f in data["findings"] if f["kind"] in ("crash", "hang", "killed")]
    assert not _gone_within({str(victim.node_id)}, 10), "racefuzz left processes on it"
    cluster.racefuzz_slotted.append(cluster.add_node(num_cpus=1))  # three slots again
    cluster.wait_for_nodes()


@pytest.mark.slow
def test_ctrl_c_stops_every_actor_and_writes_the_summary(cluster: Any, tmp_path: Path) -> None:
    proc = _start(cluster, tmp_path, "--seconds", "120", "--no-shrink")
    assert proc.stdout is not None
    for line in proc.stdout:  # fuzzing has begun on every node
        if "racefuzz: campaign " in line:
            break
    time.sleep(8)
    assert _left_on(_ids(cluster)), "the check below would see nothing"  # actors, zygotes
    proc.send_signal(signal.SIGINT)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), log
    assert "interrupted (Ctrl-C)" in (_folder(tmp_path) / "summary.md").read_text()
    assert not _gone_within(_ids(cluster), 10), "racefuzz left processes on the nodes"


def test_without_ray_nothing_of_ray_is_imported() -> None:
    code = (
        "import sys; from racefuzz.cli import commands, run_command; "
        "import racefuzz.campaign.loop, racefuzz.execute.runner; "
        "sys.exit('ray' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "racefuzz", "run", "--ray", "127.0.0.1:1", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "racefuzz: error: cannot reach the Ray cluster at '127.0.0.1:1': [Errno 111] "
        "Connection refused"
    ]
    assert not list(tmp_path.iterdir())  # no campaign folder for a campaign that never ran


def test_where_a_cluster_was_seen_counts_nodes_and_device_kinds() -> None:
    assert where_seen({}) == ""
    assert where_seen({"a": "cpu: EPYC"}) == "1 node, cpu: EPYC"
    two_gpus = {"a": "gpu: NVIDIA H200", "b": "gpu: NVIDIA H100", "c": "gpu: NVIDIA H200"}
    assert where_seen(two_gpus) == "3 nodes, 2 GPU kinds"
    assert where_seen({"a": "gpu: NVIDIA H200", "b": "cpu: EPYC"}) == "2 nodes, 2 device kinds"


def test_a_node_finds_each_library_as_the_target_says(tmp_path: Path) -> None:
    import nxrt_ep_cpu

    from racefuzz.errors import RacefuzzError
    from racefuzz.fleet.node_slot import localized
    from racefuzz.targets.registry import load_target

    config = tmp_path / "racefuzz.toml"
    config.write_text(
        '[targets.n]\nmodels = ["tiny"]\n[targets.n.libraries]\nnxrt = { package = "nxrt_ep_cpu" }'
        '\n[targets.n.profiles.p]\nlibrary = "nxrt"\nep = "cpu_ep"\n'
    )
    driver = load_target("n", config)
    assert localized(driver, "n") is driver  # its paths exist here: as it is
    # Another node's copy of the package is elsewhere: the package says where.
    elsewhere = replace(driver.libraries[0], path=tmp_path / "gone" / "ep.so")
    moved = replace(driver, libraries=(elsewhere,))
    assert localized(moved, "n").libraries[0].path == Path(nxrt_ep_cpu.get_library_path())
    # A plain path that is not on this node is the node's problem, said in one line.
    with pytest.raises(RacefuzzError, match="no EP library"):
        localized(replace(moved, libraries=(replace(elsewhere, package=None),)), "n")
    # A built-in target is loaded on the node itself (the testbed: built into its cache).
    testbed = load_target("testbed:B3")
    lib = replace(testbed.libraries[0], path=tmp_path / "gone.so")
    here = localized(replace(testbed, libraries=(lib,)), "testbed:B3")
    assert here.libraries[0].path.is_file() and here.env == testbed.env
