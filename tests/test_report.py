"""Report bundles are written from a real failing run and re-render byte for byte.

The failing run is real: a target whose profile asks for an EP device no library provides, so
`create` fails inside a real worker process, next to a session on ORT's own CPU EP.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.execute.executor import RunOptions
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.report import bundle as bundles
from racefuzz.report import envinfo, run_json
from racefuzz.report import markdown as report
from racefuzz.schedule.json_io import load
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.builtin import nxrt_cpu_target
from racefuzz.targets.model import Profile, Target
from racefuzz.targets.registry import load_target

GHOST = Profile("ghost", None, "NoSuchEP", {})
CPU = Profile("cpu", None, "CPUExecutionProvider", {})
TARGET = Target("ghost-cpu", (), (GHOST, CPU), ("tiny", "mlp"))

MINIMAL = Schedule(
    2,
    (
        Step(0, Op.REGISTER),  # registers nothing here, but well-formedness asks for it
        Step(0, Op.CREATE, session="s0", profile="cpu", model="tiny"),
        Step(0, Op.RUN, session="s0", group=1),
        Step(1, Op.CREATE, session="s1", profile="ghost", model="tiny", group=1),
        Step(1, Op.RUN, session="s1"),
    ),
)
ORIGINAL = Schedule(
    3,
    (
        MINIMAL.steps[0],
        Step(2, Op.CREATE, session="s2", profile="cpu", model="mlp"),
        *MINIMAL.steps[1:],
        Step(2, Op.RUN, session="s2"),
        Step(0, Op.RELEASE, session="s0"),
    ),
)
STATS = {
    "passes": {"delete steps": {"calls": 7, "shrinks": 2}, "merge threads": {"calls": 3}},
    "seconds": 4.25,
    "stopped": "done",
}


@pytest.fixture(scope="module")
def failing() -> tuple[RunResult, Finding]:
    run = executor.run(TARGET, MINIMAL)
    assert [f.op for f in run.findings] == ["create"], run
    return run, run.findings[0]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, failing: tuple[RunResult, Finding]) -> Path:
    run, finding = failing
    root = tmp_path_factory.mktemp("reports")
    return bundles.write_bundle(
        root, finding, ORIGINAL, MINIMAL, run, TARGET, "ghost-cpu", (3, 3), STATS
    )


def test_a_bundle_holds_every_file_of_the_layout(bundle: Path) -> None:
    names = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file())
    assert names == [
        "bundle.json",
        "env.json",
        "failing_run.json",
        "finding.json",
        "logs/stderr.txt",
        "original.json",
        "racefuzz.toml",  # a config-defined target: the bundle carries its table
        "report.md",
        "repro.py",
        "schedule.json",
    ]
    assert load(bundle / "schedule.json") == MINIMAL
    assert load(bundle / "original.json") == ORIGINAL
    assert load_target("ghost-cpu", bundle / "racefuzz.toml") == TARGET


def test_the_folder_is_named_by_date_and_signature_slug(
    bundle: Path, failing: tuple[RunResult, Finding]
) -> None:
    date = json.loads((bundle / "bundle.json").read_text())["created"]
    assert bundle.name == f"{date}-{failing[1].slug}"
    assert bundle.name.startswith(f"{date}-error-create-no-ep-device-for-profile")


def test_finding_json_holds_the_finding_and_its_reproduction(
    bundle: Path, failing: tuple[RunResult, Finding]
) -> None:
    data = json.loads((bundle / "finding.json").read_text())
    assert data == json.loads(json.dumps({**failing[1].to_json(), "reproduction": [3, 3]}))
    assert run_json.finding_from_json(data) == failing[1]


def test_the_report_shows_the_minimal_schedule_with_one_column_per_thread(bundle: Path) -> None:
    text = (bundle / "report.md").read_text()
    assert "| # | thread 0 | thread 1 |\n|--:|:--|:--|\n" in text
    assert "| 1 | create s0 (cpu, tiny) |  |" in text
    assert "| 2 | run s0 *(overlap 1)* |  |" in text
    assert "| 3 |  | **create s1 (ghost, tiny) *(overlap 1)*** ⟵ failed |" in text
    assert "steps 2-3 (group 1)" in text
    assert "5 steps on 2 threads (shrunk from 8 steps on 3 threads)." in text


def test_the_report_says_what_failed_how_often_and_what_each_step_did(bundle: Path) -> None:
    text = (bundle / "report.md").read_text()
    assert text.startswith(
        "# error in `create`: no EP device for profile '…' (NoSuchEP) (reproduced 3/3)\n"
    )
    assert "| reproduced | 3 of 3 replays (100%) of the minimal schedule |" in text
    assert "RuntimeError: no EP device for profile 'ghost' (NoSuchEP)" in text
    assert "| 4 | 1 | run s1 | skipped: session s1 was not created |" in text
    assert "| origin | not classified |" in text


def test_the_report_shows_shrink_statistics_and_the_environment(bundle: Path) -> None:
    text = (bundle / "report.md").read_text()
    assert "| steps | 8 | 5 |\n| threads | 3 | 2 |" in text
    assert "| pass | calls | shrinks |" in text
    assert "| delete steps | 7 | 2 |\n| merge threads | 3 |  |" in text
    assert "- seconds: 4.2" in text
    assert "## Environment" in text and "- Python: CPython" in text


def test_the_report_ends_with_the_commands_that_replay_it(bundle: Path) -> None:
    text = (bundle / "report.md").read_text()
    assert text.endswith(
        "```sh\nracefuzz replay schedule.json --config racefuzz.toml --target ghost-cpu --times 20"
        "\npython repro.py\n```\n"
    )


def test_render_reproduces_report_md_byte_for_byte(bundle: Path) -> None:
    assert report.render(bundle) == (bundle / "report.md").read_text(encoding="utf-8")


def test_the_failing_run_round_trips_through_its_json(failing: tuple[RunResult, Finding]) -> None:
    run = failing[0]
    back = run_json.run_from_json(run_json.run_to_json(run), run.stderr_tail)
    assert back == run


def test_a_second_bundle_of_one_finding_gets_a_numbered_folder(
    tmp_path: Path, failing: tuple[RunResult, Finding]
) -> None:
    run, finding = failing
    first, second = (
        bundles.write_bundle(tmp_path, finding, MINIMAL, MINIMAL, run, TARGET, "x", (1, 2))
        for _ in range(2)
    )
    assert second.name == first.name + "-2"
    text = (second / "report.md").read_text()
    assert "No shrink statistics were recorded." in text
    assert "5 steps on 2 threads (not shrunk)." in text


@dataclass(frozen=True)
class _PassStats:
    name: str
    calls: int
    shrinks: int


def test_shrink_statistics_may_hold_dataclasses_and_tuples(
    tmp_path: Path, failing: tuple[RunResult, Finding]
) -> None:
    run, finding = failing
    stats = {"passes": (_PassStats("drop a thread", 3, 1),), "one_minimal": True}
    folder = bundles.write_bundle(
        tmp_path, finding, ORIGINAL, MINIMAL, run, TARGET, "ghost-cpu", (1, 1), stats
    )
    text = (folder / "report.md").read_text()
    assert "| pass | calls | shrinks |\n|:--|--:|--:|\n| drop a thread | 3 | 1 |" in text
    assert "- one_minimal: True" in text


def test_the_seed_of_the_failing_run_reaches_the_commands_and_repro(
    tmp_path: Path, failing: tuple[RunResult, Finding]
) -> None:
    run, finding = failing
    folder = bundles.write_bundle(
        tmp_path,
        finding,
        MINIMAL,
        MINIMAL,
        run,
        TARGET,
        "ghost-cpu",
        (1, 1),
        limits=RunOptions(seed=7, step_timeout=5.0, max_rss_mb=900.0),
    )
    text = (folder / "report.md").read_text()
    assert "schedule.json --config racefuzz.toml --target ghost-cpu --times 20 --seed 7\n" in text
    script = (folder / "repro.py").read_text()
    assert "\nSEED = 7\n" in script
    # and so do the limits its runs were held to: a leak is a run past the campaign's ceiling
    assert "\nSTEP_TIMEOUT = 5.0\n" in script and "\nMAX_RSS_MB = 900.0  #" in script


def test_folders_created_at_once_by_many_threads_are_all_distinct(tmp_path: Path) -> None:
    got: list[Path] = []
    lock = threading.Lock()

    def make() -> None:
        path = bundles.create_folder(tmp_path, "same")
        with lock:
            got.append(path)

    threads = [threading.Thread(target=make) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 16
    assert {p.name for p in got} == {"same", *(f"same-{n}" for n in range(2, 17))}


def test_a_library_target_bundle_passes_the_library_path_to_repro(tmp_path: Path) -> None:
    nxrt = nxrt_cpu_target()
    target = Target("g2", nxrt.libraries, (Profile("ghost", "nxrt", "no_such_ep", {}),), ("tiny",))
    schedule = Schedule(
        1, (Step(0, Op.REGISTER), Step(0, Op.CREATE, session="s1", profile="ghost", model="tiny"))
    )
    run = executor.run(target, schedule)
    folder = bundles.write_bundle(
        tmp_path, run.findings[0], schedule, schedule, run, target, "g2", (1, 1)
    )
    text = (folder / "report.md").read_text()
    assert f"python repro.py {nxrt.libraries[0].path}\n```\n" in text
    # A GPU target's race may need the load a campaign had: its bundle says to replay in parallel.
    overlap = replace(target, cluster_by="overlap")
    again = bundles.write_bundle(
        tmp_path, run.findings[0], schedule, schedule, run, overlap, "g2", (1, 1)
    )
    gpu_text = (again / "report.md").read_text()
    assert f"python repro.py {nxrt.libraries[0].path} --parallel 8\n```\n" in gpu_text
    env = json.loads((folder / "env.json").read_text())
    lib = nxrt.libraries[0].path
    assert env["libraries"] == [
        {"name": "nxrt", "path": str(lib), "sha256": hashlib.sha256(lib.read_bytes()).hexdigest()}
    ]
    assert f"EP library nxrt: {lib} (sha256 {env['libraries'][0]['sha256']})" in text


def test_env_json_names_ort_python_os_and_cpu_without_failing_on_a_gpu_less_machine() -> None:
    env = envinfo.collect(TARGET)
    import onnxruntime

    assert env["onnxruntime"] == onnxruntime.__version__
    assert env["python"]["version"].count(".") == 2
    assert env["cpu"]["count"] >= 1 and env["os"]["system"]
    assert isinstance(env["gpus"], list)
    assert env["libraries"] == []
    json.dumps(env)


def test_the_trace_lines_shown_are_the_misroutes_and_the_allocations_they_touched() -> None:
    trace: list[dict[str, Any]] = [
        {"ev": "alloc", "backend": "mgx", "session": 1, "owner": "mgx", "bytes": 64},
        {"ev": "alloc", "backend": "dml", "session": 2, "owner": "dml", "bytes": 64},
        {"ev": "alloc", "backend": "mgx", "session": 1, "owner": "mgx", "bytes": 1024},
        {"ev": "compute", "backend": "mgx", "session": 1, "misroute": False},
        {
            "ev": "copy",
            "backend": "dml",
            "session": None,
            "src": {"owner": "host"},
            "dst": {"owner": "mgx", "kind": "device"},
            "bytes": 64,
            "misroute": True,
        },
    ]
    assert report.explaining_trace(trace) == [0, 4]


def test_rendering_a_folder_that_is_not_a_bundle_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(RacefuzzError, match=r"^'.*' is not a report bundle \(no finding\.json\)$"):
        report.render(tmp_path)


@pytest.mark.skipif(os.name == "nt", reason="the crash was found on Linux")
def test_a_real_crash_report_marks_the_step_in_flight_and_shows_the_stacks(
    tmp_path: Path,
) -> None:
    # A real crash racefuzz found in nxrt-ep-cpu 0.1.0.dev6 (schedules/misuse/): dropping the
    # sessions at exit segfaults after an unregister on another thread.
    nxrt = nxrt_cpu_target()
    schedule = Schedule(
        2,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="nxrt-b", model="tiny"),
            Step(1, Op.UNREGISTER),
            Step(0, Op.REGISTER),
            Step(1, Op.CREATE, session="s2", profile="nxrt-b", model="tiny"),
        ),
    )
    run = executor.run(nxrt, schedule)
    assert [(f.kind, f.op) for f in run.findings] == [("crash", "teardown")], run
    folder = bundles.write_bundle(
        tmp_path, run.findings[0], schedule, schedule, run, nxrt, "nxrt-cpu", (1, 1)
    )
    text = (folder / "report.md").read_text()
    teardown = "teardown (dropping what the schedule left alive)"
    assert f"| 5 | **{teardown}** ⟵ failed |  |" in text
    assert "Worker exit: crash (SIGSEGV), steps in flight: 5;" in text
    assert f"| 5 | 0 | {teardown} | **crash in flight** |  |" in text
    assert "## Stacks: the faulting thread's native frames, then every thread's Python" in text
    assert "Fatal Python error: Segmentation fault" in text
    assert "Fatal Python error" in (folder / "logs" / "stderr.txt").read_text()
    assert report.render(folder) == text


def test_a_long_error_is_cut_in_the_step_table_and_shown_whole_under_messages(
    tmp_path: Path, failing: tuple[RunResult, Finding]
) -> None:
    run, finding = failing
    long = "E" * 150 + " the end of a long EP message " + "x" * 60
    outcomes = tuple(o if o.ok else replace(o, message=long) for o in run.outcomes)
    folder = bundles.write_bundle(
        tmp_path, finding, MINIMAL, MINIMAL, replace(run, outcomes=outcomes), TARGET, "x", (1, 1)
    )
    table, messages = (folder / "report.md").read_text().split("### Messages", 1)
    assert "… (whole message below)" in table and long not in table
    assert long in messages


def test_a_bundle_folder_gets_the_users_usual_permissions(bundle: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    assert bundle.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (bundle / "report.md").stat().st_mode & 0o777 == 0o666 & ~umask
