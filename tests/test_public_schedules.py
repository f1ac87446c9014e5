"""schedules/public/: one schedule per public ORT EP concurrency or lifecycle report, replayed as
an EP's regression suite. Each file is well-formed, names its report, is listed in the folder's
README, uses only the profile names every built-in target aliases, and the whole folder replays
clean on the fixed testbed and on ORT's CPU EP (real racefuzz, through the CLI)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_cli import racefuzz

from racefuzz.schedule.json_io import load, load_many
from racefuzz.schedule.model import problems

PUBLIC = Path(__file__).resolve().parent.parent / "schedules" / "public"
README = PUBLIC / "README.md"
# A report as descriptions name it: onnxruntime#NNNNN, ROCm hip-ep 805, openvino 22694, qnn 822.
REPORT = re.compile(r"#\d+|hip-ep \d+|openvino \d+|qnn \d+")
GENERIC_PROFILES = {"dml", "mgx"}  # every built-in target aliases these to its two profiles


def files() -> list[Path]:
    return sorted(PUBLIC.glob("*.json"))


def test_the_folder_holds_schedules_and_the_seed_corpus_does_not_include_them() -> None:
    assert len(files()) >= 15
    seed = [p.parent for p, _ in load_many(PUBLIC.parent)]
    assert PUBLIC not in seed  # `replay schedules/` stays the seed's S1-S9


@pytest.mark.parametrize("path", files(), ids=lambda p: p.stem)
def test_each_schedule_is_well_formed_and_names_its_report(path: Path) -> None:
    schedule = load(path)  # decoding refuses a malformed schedule with one line
    assert problems(schedule) == []
    assert schedule.name == path.stem
    assert REPORT.search(schedule.description), schedule.description
    # The report's number leads the file name and the description.
    number = re.match(r"(?:hip-ep-|openvino-|qnn-)?(\d+)_", path.name)
    assert number and number.group(1) in schedule.description.split(":")[0], path.name
    assert schedule.profiles() <= GENERIC_PROFILES, schedule.profiles()


def test_the_readme_table_lists_every_schedule_file() -> None:
    rows = [
        line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("|")
    ]
    table = "\n".join(rows)
    missing = [p.name for p in files() if f"]({p.name})" not in table]
    assert not missing, missing
    linked = set(re.findall(r"\]\(([^)/]+\.json)\)", table))
    assert linked <= {p.name for p in files()}, linked - {p.name for p in files()}


@pytest.mark.parametrize("target", ["testbed", "cpu"])
def test_the_folder_replays_clean(target: str, testbed_library: Path) -> None:
    proc = racefuzz("replay", str(PUBLIC), "--target", target)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    count = len(files())
    assert f"{count} schedule(s) replayed x1, 0 with findings, 0 skipped" in proc.stdout
