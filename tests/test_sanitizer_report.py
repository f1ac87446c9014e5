"""The sanitizer report parser on reports captured from real worker runs (tests/data/sanitizer/:
the whole stderr of a `testbed[asan]:B10` and a `testbed[tsan]:B9` worker, faulthandler and
all), and the oracle that turns them into findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from racefuzz.judge import sanitizer_report
from racefuzz.judge.oracles import judge
from racefuzz.judge.outcome import Exit, RunResult, StepOutcome
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.sanitizer import EXIT_CODE

DATA = Path(__file__).parent / "data" / "sanitizer"
EP = ("libracefuzz_testbed.so",)
ASAN = (DATA / "asan_heap_use_after_free.txt").read_text(encoding="utf-8")
TSAN = (DATA / "tsan_data_race.txt").read_text(encoding="utf-8")
UAF = (
    "heap-use-after-free: testbed::TestbedEp::backend "
    "(freed in testbed::TestbedFactory::ReleaseEpImpl)"
)
RACE = "data race: CountLaunch ~ CountLaunch"


def test_extract_finds_exactly_one_report_in_a_workers_stderr() -> None:
    for text, title in ((ASAN, "==ERROR: AddressSanitizer"), (TSAN, "WARNING: ThreadSanitizer")):
        (report,) = sanitizer_report.extract(text)
        assert title.lstrip("=") in report.splitlines()[0]
        assert report.splitlines()[-1].startswith("SUMMARY: ")


def test_extract_finds_nothing_in_a_clean_stderr() -> None:
    assert sanitizer_report.extract("Fatal Python error: Segmentation fault\n") == ()


def test_kind_and_type_drop_addresses_and_pids() -> None:
    (asan,) = sanitizer_report.extract(ASAN)
    (tsan,) = sanitizer_report.extract(TSAN)
    assert (sanitizer_report.kind(asan), sanitizer_report.bug_type(asan)) == (
        "asan",
        "heap-use-after-free",
    )
    assert (sanitizer_report.kind(tsan), sanitizer_report.bug_type(tsan)) == ("tsan", "data race")


def test_summary_names_the_top_frames_inside_the_ep() -> None:
    assert sanitizer_report.summary(sanitizer_report.extract(ASAN)[0], EP) == UAF
    assert sanitizer_report.summary(sanitizer_report.extract(TSAN)[0], EP) == RACE


def test_summary_without_ep_frames_says_so() -> None:
    summary = sanitizer_report.summary(sanitizer_report.extract(ASAN)[0], ("libother.so",))
    assert summary == "heap-use-after-free: ? (freed in ?)"


def test_a_data_race_summary_does_not_depend_on_which_thread_came_first() -> None:
    text = (
        "WARNING: ThreadSanitizer: data race (pid=1)\n"
        "  Write of size 8 at 0x1 by thread T1:\n"
        "    #0 0x10 in ns::B() /x/b.cc:3 (libep.so+0x10)\n\n"
        "  Previous read of size 8 at 0x1 by main thread:\n"
        "    #0 0x20 in std::vector<int>::size() const /usr/v.h:1 (libep.so+0x20)\n"
        "    #1 0x30 in ns::A(int, char const*) const /x/a.cc:9 (libep.so+0x30)\n\n"
        "SUMMARY: ThreadSanitizer: data race /x/b.cc:3 in ns::B()\n"
    )
    swapped = text.replace("thread T1", "thread TX").replace("main thread", "thread T1")
    for t in (text, swapped):
        assert sanitizer_report.summary(t, ("libep.so",)) == "data race: ns::A ~ ns::B"


SCHED = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="mlp"),
        Step(1, Op.CREATE, session="s2", profile="dml", model="mlp"),
        Step(0, Op.RUN, session="s1", group=1),
        Step(1, Op.RUN, session="s2", group=1),
    ),
)


@pytest.mark.parametrize("stderr,kind,message", [(TSAN, "tsan", RACE), (ASAN, "asan", UAF)])
def test_a_report_is_a_finding_even_when_every_output_was_right(
    stderr: str, kind: str, message: str
) -> None:
    outcomes = tuple(StepOutcome(i, True) for i in range(3))
    result = RunResult(
        SCHED,
        outcomes,
        Exit.CRASH,
        returncode=EXIT_CODE,
        in_flight=(3, 4),
        sanitizer_reports=sanitizer_report.extract(stderr),
    )
    (finding,) = judge(result, None, EP).findings  # the sanitizer's exit is no second finding
    assert (finding.kind, finding.op, finding.message, finding.step) == (kind, "run", message, 3)
    assert finding.cluster == f"{kind}|{message}"
    assert "Sanitizer" in finding.raw
