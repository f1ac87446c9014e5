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
