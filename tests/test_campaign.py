"""`racefuzz run`: a campaign writes its results whatever ends it; clean EPs yield nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "racefuzz", "run", "--out", str(tmp_path), "--no-dashboard", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def campaign_dir(tmp_path: Path) -> Path:
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return folder


# nxrt-ep-cpu crashes after an unregister that ORT's contract forbids (schedules/misuse/):
# default campaigns keep to the contract, lifecycle included, and find nothing.
@pytest.mark.slow
@pytest.mark.parametrize(("target", "extra"), [("cpu", ()), ("nxrt-cpu", ())])
def test_a_short_campaign_on_a_clean_ep_finds_nothing_and_exits_0(
    tmp_path: Path, target: str, extra: tuple[str, ...]
) -> None:
    proc = start(
        tmp_path,
        *extra,
        "--target",
        target,
        "--seconds",
        "6",
        "--jobs",
        "2",
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    folder = campaign_dir(tmp_path)
    data = json.loads((folder / "findings.json").read_text())
    assert data["findings"] == [] and data["schedules"] > 10
    assert "Nothing found." in (folder / "summary.md").read_text()
    umask = os.umask(0)
    os.umask(umask)
    for name in ("summary.md", "findings.json"):  # the user's usual permissions, not 0600
        assert (folder / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert 'failures="0"' in (tmp_path / "junit.xml").read_text()


@pytest.mark.parametrize(("sig", "label"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_ctrl_c_or_sigterm_stops_the_campaign_and_still_writes_the_summary(
    tmp_path: Path, sig: signal.Signals, label: str
) -> None:
    proc = start(tmp_path, "--target", "cpu", "--seconds", "300", "--jobs", "2")
    assert proc.stdout is not None
    # Synchronised on what the campaign prints, not on a sleep: a loaded machine may take
    # many seconds to import onnxruntime. From the "campaign" line on, the signal must stop it,
    # wherever it lands (at once here: in the campaign's start-up).
    first = proc.stdout.readline()
    assert first.startswith("racefuzz: campaign"), first
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err, err
    summary = (campaign_dir(tmp_path) / "summary.md").read_text()
    assert f"interrupted ({label})" in summary
    assert "0 worker crashes" in summary  # killing the workers is not mistaken for a crash


def test_the_same_seed_makes_the_same_schedules(tmp_path: Path) -> None:
    from racefuzz import strategies
    from racefuzz.strategies.space import space_for
    from racefuzz.targets.registry import load_target

    space = space_for(load_target("cpu"), 24, 4)
    a = strategies.make("portfolio", space, 7)
    b = strategies.make("portfolio", space, 7)
    for _ in range(30):
        assert a.next_schedule() == b.next_schedule()


@pytest.mark.slow
def test_allow_misuse_finds_the_nxrt_crash_and_labels_it_misuse_not_a_failure(
    tmp_path: Path,
) -> None:
    proc = start(
        tmp_path,
        *("--target", "nxrt-cpu", "--allow-misuse", "--seconds", "20", "--jobs", "2"),
        # The random walk gives unregisters a steady share (about 1 in 8 illegal schedules
        # crash); the portfolio's share moves with its bandit and the seed.
        *("--strategy", "random", "--no-shrink"),
    )
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err  # misuse alone never fails the run
    folder = campaign_dir(tmp_path)
    data = json.loads((folder / "findings.json").read_text())
    crashes = [f for f in data["findings"] if f["kind"] == "crash"]
    assert crashes and all(f["verdict"] == "misuse" for f in data["findings"]), data
    assert all("unregister" in f["misuse"] for f in crashes)
    assert "## API misuse" in (folder / "summary.md").read_text()
