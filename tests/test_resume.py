"""`racefuzz run --resume DIR` keeps every option of the campaign it resumes (known issues
included) unless the command line gives it again, and then says so; a folder of the previous
release resumes too, and a damaged header is one line and exit 2."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from racefuzz.cli import resume_options
from racefuzz.cli.main import build_parser
from racefuzz.targets.registry import load_target

ROOT = Path(__file__).resolve().parent.parent
KNOWN = ROOT / "testbed" / "known-issues.json"
# What the previous release's `racefuzz run` wrote into findings.json (git show
# HEAD~2:racefuzz/run_command.py and results.py): its options, then the results.
OLD_HEADER: tuple[str, ...] = (
    "target",
    "target_spec",
    "seed",
    "jobs",
    "seconds",
    "strategy",
    "allow_misuse",
)
OLD_HEADER += ("known_issues", "elapsed_s", "schedules", "totals", "interrupted")
OLD_HEADER += ("internal_errors", "findings")
# What its findings entries lacked: a cluster's state was its state line only.
NEW_ENTRY_KEYS = frozenset({"status", "notes", "adopted_from", "retry"})


def racefuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "racefuzz", "run", "--no-dashboard", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def findings_json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "findings.json").read_text())
    return data


@pytest.fixture(scope="module")
def campaign(testbed_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign on the fixed testbed with a known-issues file: the seed corpus meets R1
    within a second, and every R1 cluster is known, so it exits 0."""
    tmp = tmp_path_factory.mktemp("campaign")
    known = tmp / "known.json"
    shutil.copy(KNOWN, known)
    proc = racefuzz(
        *("--target", "testbed", "--seconds", "4", "--jobs", "2", "--seed", "3"),
        *("--known", str(known), "--no-shrink", "--out", str(tmp / "out")),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (folder,) = (tmp / "out").iterdir()
    found = findings_json(folder)["findings"]
    assert found and all(f["verdict"] == "known" for f in found), found
    return folder


@pytest.fixture
def folder(campaign: Path, tmp_path: Path) -> Path:
    """A copy of the campaign for one test to resume (its paths are relative to it)."""
    return Path(shutil.copytree(campaign, tmp_path / campaign.name))


def assert_all_known_and_unshrunk(proc: subprocess.CompletedProcess[str], folder: Path) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shrinking" not in proc.stdout and "0 new" in proc.stdout, proc.stdout
    found = findings_json(folder)["findings"]
    assert all(f["verdict"] == "known" for f in found), found
    assert {f["status"] for f in found} == {"known issue (not shrunk)"}, found
    assert all(f["state"].startswith(f["status"]) for f in found), found  # then its notes


@pytest.mark.slow
def test_shrink_only_keeps_the_known_clusters_even_after_their_file_moved(folder: Path) -> None:
    data = findings_json(folder)
    assert data["known_clusters"] and Path(data["known_issues"]).is_file()
    # The clusters themselves are kept: a file moved or edited since changes nothing.
    data["known_issues"] = str(folder.parent / "moved-away.json")
    (folder / "findings.json").write_text(json.dumps(data))
    proc = racefuzz("--resume", str(folder), "--shrink-only")
    assert_all_known_and_unshrunk(proc, folder)
    assert "racefuzz: 0 schedules" in proc.stdout and "overrides" not in proc.stdout
    # `--shrink-only` shrinks whatever the campaign said: its --no-shrink is still its own.
    assert findings_json(folder)["shrink"] is False


@pytest.mark.slow
def test_an_option_given_again_overrides_the_campaigns_and_says_so(folder: Path) -> None:
    # --no-shrink is the campaign's own value: not an override, no line.
    proc = racefuzz("--resume", str(folder), "--seed", "7", "--seconds", "2", "--no-shrink")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "overrides" in line]
    assert lines == [
        "racefuzz: resume: --seed 7 overrides the campaign's 3",
        "racefuzz: resume: --seconds 2 overrides the campaign's 4",
    ], proc.stdout
    data = findings_json(folder)
    assert (data["seed"], data["seconds"], data["jobs"], data["shrink"]) == (7, 2.0, 2, False)
    assert "2 job(s), seed 7" in (folder / "summary.md").read_text()
    assert all(f["verdict"] == "known" for f in data["findings"]), data["findings"]


@pytest.mark.slow
def test_a_folder_of_the_previous_release_resumes(folder: Path, tmp_path: Path) -> None:
    data = findings_json(folder)
    old = {key: data[key] for key in OLD_HEADER}
    known = tmp_path / "known.json"
    shutil.copy(data["known_issues"], known)
    old["known_issues"] = str(known)  # all it kept of the known issues: the file's path
    old["findings"] = [
        {k: v for k, v in f.items() if k not in NEW_ENTRY_KEYS} for f in old["findings"]
    ]
    (folder / "findings.json").write_text(json.dumps(old, indent=1))
    proc = racefuzz("--resume", str(folder), "--shrink-only")
    assert_all_known_and_unshrunk(proc, folder)
    # A field it lacks takes today's default; the header now keeps every option.
    new = findings_json(folder)
    assert new["seed"] == 3 and new["shrink"] is True and new["known_clusters"], new
    # Its known-issues file gone: one line saying what to do, not every known cluster new.
    (folder / "findings.json").write_text(json.dumps(old, indent=1))
    known.unlink()
    proc = racefuzz("--resume", str(folder), "--shrink-only")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "with the campaign's known issues" in proc.stderr and "--known FILE" in proc.stderr


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{", "findings.json is not valid JSON"),
        ("[]", "not a campaign's"),
        ('{"findings": {}}', "not a campaign's"),
        ('{"seed": "three", "findings": []}', "'seed': \"three\", not an integer"),
        ('{"jobs": true, "findings": []}', "'jobs': true, not an integer"),
        ('{"known_clusters": "x|y", "findings": []}', "not a list of cluster keys"),
    ],
)
def test_a_damaged_header_is_one_line_and_exit_2(tmp_path: Path, content: str, says: str) -> None:
    (tmp_path / "findings.json").write_text(content)
    proc = racefuzz("--resume", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"racefuzz: error: cannot resume '{tmp_path}': " in proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr


def run_dests() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest for a in sub.choices["run"]._actions}


def test_every_option_of_run_is_kept_by_a_resume_or_said_to_be_per_run() -> None:
    # A new option must be added to `resume_options.KEPT`, or said to be one run's choice.
    kept = {opt.dest for opt in resume_options.KEPT} | set(resume_options.KEPT_APART)
    assert run_dests() == kept | set(resume_options.PER_RUN)


def settled(folder: Path, header: dict[str, Any], *argv: str) -> argparse.Namespace:
    (folder / "findings.json").write_text(json.dumps({**header, "findings": []}))
    args = build_parser().parse_args(["run", "--resume", str(folder), *argv])
    resume_options.settle(args)
    return args


def test_switches_corpus_and_config_are_kept_or_overridden(tmp_path: Path) -> None:
    config, corpus = tmp_path / "racefuzz.toml", tmp_path / "seeds"
    header = {"config": str(config), "allow_misuse": True, "lifecycle": False, "zygote": False}
    header.update(no_corpus=True, corpus=None, shrink_budget=5, max_rss_mb=512)
    args = settled(tmp_path, header)
    assert args.config == config
    assert (args.allow_misuse, args.lifecycle, args.zygote) == (True, False, False)
    assert (args.no_corpus, args.shrink_budget, args.max_rss_mb) == (True, 5.0, 512.0)
    # What the header lacks (an earlier release's) is today's default.
    assert (args.jobs, args.step_timeout, args.strategy) == (os.cpu_count(), 20.0, "portfolio")
    assert args.resumed.overrides == []
    args = settled(tmp_path, header, "--no-allow-misuse", "--zygote", "--corpus", str(corpus))
    assert (args.allow_misuse, args.zygote, args.no_corpus) == (False, True, False)
    assert args.corpus == corpus
    assert args.resumed.overrides == [
        "--no-allow-misuse overrides the campaign's --allow-misuse",
        "--zygote overrides the campaign's --spawn",
        f"--corpus {corpus} overrides the campaign's --no-corpus",
    ]


def test_the_campaigns_tolerance_is_kept_unless_config_is_given_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = load_target("cpu")
    assert target.tolerance is None
    args = settled(tmp_path, {"tolerance": [0.001, 1e-05]})
    assert resume_options.finish(args, target).tolerance == (0.001, 1e-05)
    assert "the campaign's tolerance (0.001, 1e-05) kept" in capsys.readouterr().out
    config = tmp_path / "racefuzz.toml"
    args = settled(tmp_path, {"tolerance": [0.001, 1e-05]}, "--config", str(config))
    assert resume_options.finish(args, target).tolerance is None
    assert "--config's tolerance None overrides" in capsys.readouterr().out
