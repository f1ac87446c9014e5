"""Bad input is one line and exit 2, checked before anything runs: a library that is no EP, an
EP name the library does not provide, unreadable or oversized schedules, impossible flag values,
unwritable output paths, a missing config file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import SCHEDULES, one_error_line, racefuzz

LIBZ = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")


def toml_target(tmp_path: Path, library: Path, ep: str) -> Path:
    config = tmp_path / "racefuzz.toml"
    config.write_text(
        f'[targets.mine.libraries]\nlib = "{library}"\n'
        f'[targets.mine.profiles.p]\nlibrary = "lib"\nep = "{ep}"\n'
    )
    return config


@pytest.mark.skipif(not LIBZ.is_file(), reason="no libz.so.1 at the Debian path")
def test_a_library_that_is_no_ep_is_one_line_naming_the_missing_entry_point(
    tmp_path: Path,
) -> None:
    config = toml_target(tmp_path, LIBZ, "ZEP")
    out = tmp_path / "out"
    line = one_error_line(
        racefuzz("run", "--config", str(config), "--target", "mine", "--out", str(out))
    )
    assert "cannot register EP library 'lib'" in line and "CreateEpFactories" in line
    assert not out.exists()  # no campaign folder for a campaign that never started


def test_an_ep_name_the_library_does_not_provide_names_what_it_does(
    testbed_library: Path, tmp_path: Path
) -> None:
    config = toml_target(tmp_path, testbed_library, "NoSuchEP")
    line = one_error_line(
        racefuzz("replay", str(SCHEDULES), "--config", str(config), "--target", "mine")
    )
    assert line.endswith("asks for EP 'NoSuchEP', but library 'lib' provides: RacefuzzTestbed")


def test_a_binary_or_oversized_schedule_is_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    assert "not UTF-8" in one_error_line(racefuzz("replay", str(binary), "--target", "cpu"))
    huge = tmp_path / "huge.json"
    steps = [{"thread": 0, "op": "register"}] + [
        {"thread": 0, "op": "copy", "profile": "cpu"}
    ] * 5000
    huge.write_text(json.dumps({"version": 1, "threads": 1, "steps": steps}))
    assert "at most 1000 steps" in one_error_line(racefuzz("replay", str(huge), "--target", "cpu"))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--seconds", "nan"), "--seconds must be a positive number"),
        (("--seconds", "inf"), "--seconds must be a positive number"),
        (("--step-timeout", "-1"), "--step-timeout must be a positive number"),
        (("--max-rss-mb", "-1"), "--max-rss-mb must be a positive number"),
        (("--shrink-budget", "-1"), "--shrink-budget must be a positive number"),
        (("--jobs", "0"), "--jobs, --max-steps and --shrink-parallel must be at least 1"),
        (("--shrink-parallel", "0"), "--shrink-parallel must be at least 1"),
        (("--junit", "/nonexistent-dir/j.xml"), "cannot write --junit"),
        (("--config", "/nonexistent.toml"), "cannot read config '/nonexistent.toml': no such file"),
    ],
)
def test_impossible_flag_values_are_one_line_before_anything_runs(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    out = tmp_path / "out"
    line = one_error_line(racefuzz("run", "--target", "cpu", "--out", str(out), *flags))
    assert says in line, line
    assert not out.exists()


def test_out_pointing_at_a_file_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    line = one_error_line(racefuzz("run", "--target", "cpu", "--out", str(afile)))
    assert "is a file, not a folder" in line


def test_an_unknown_strategy_is_one_line_and_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    line = one_error_line(
        racefuzz("run", "--target", "cpu", "--strategy", "bogus", "--out", str(out))
    )
    assert line == (
        "racefuzz: error: unknown strategy 'bogus' "
        "(known: mutate, pct, portfolio, random, replay, swarm)"
    )
    assert not out.exists()


def test_shrink_checks_out_before_any_work(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    schedule = SCHEDULES / "s3_two_sessions_dml_runs.json"
    line = one_error_line(
        racefuzz("shrink", str(schedule), "--target", "testbed:B3", "--out", str(afile), timeout=60)
    )
    assert line == f"racefuzz: error: --out '{afile}' is a file, not a folder"
    below = afile / "bundles"
    line = one_error_line(
        racefuzz("shrink", str(schedule), "--target", "testbed:B3", "--out", str(below), timeout=60)
    )
    assert line == f"racefuzz: error: --out '{below}' (at '{afile}') is a file, not a folder"


def test_out_on_a_read_only_filesystem_is_one_line() -> None:
    line = one_error_line(racefuzz("run", "--target", "cpu", "--out", "/proc/racefuzz-out"))
    assert line.startswith("racefuzz: error: cannot write results under --out '/proc/racefuzz-out'")


def test_a_profile_that_never_creates_a_session_is_refused_up_front(
    testbed_library: Path, tmp_path: Path
) -> None:
    config = tmp_path / "racefuzz.toml"
    config.write_text(
        f'[targets.mine]\nmodels = ["tiny", "mlp"]\n'
        f'[targets.mine.libraries]\nlib = "{testbed_library}"\n'
        '[targets.mine.profiles.good]\nlibrary = "lib"\nep = "RacefuzzTestbed"\n'
        'options = { profile = "dml" }\n'
        '[targets.mine.profiles.bad]\nlibrary = "lib"\nep = "RacefuzzTestbed"\n'
        'options = { profile = "nosuchbackend" }\n'
    )
    out = tmp_path / "out"
    line = one_error_line(
        racefuzz("run", "--config", str(config), "--target", "mine", "--out", str(out))
    )
    assert line.startswith(
        "racefuzz: error: profile 'bad' cannot create a session with any model of the target "
        "(tiny, mlp): "
    ), line
    assert "nosuchbackend" in line, line
    assert not out.exists()
