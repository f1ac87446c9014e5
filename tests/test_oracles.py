"""Oracles turn outcomes into findings whose signatures survive run-to-run noise."""

from __future__ import annotations

from dataclasses import replace

from racefuzz.judge.oracles import judge, normalise, overlap_shape
from racefuzz.judge.outcome import Check, Exit, RunResult, StepOutcome
from racefuzz.schedule.model import Op, Schedule, Step

SCHED = Schedule(
    2,
    (
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="dml", model="mlp"),
        Step(1, Op.RUN, session="s1"),
        Step(0, Op.COPY, profile="mgx"),
    ),
)


def test_normalise_keeps_the_eps_words_and_strips_numbers_addresses_and_node_names() -> None:
    a = (
        "Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running "
        "RacefuzzTestbed_123 node. Name:'RacefuzzTestbed_123_0' Status Message: HIP failure 1: "
        "invalid argument (ptr 0x7f00dead)"
    )
    b = a.replace("123", "9").replace("0x7f00dead", "0x55aa")
    assert normalise(a) == normalise(b) == "HIP failure N: invalid argument (ptr <addr>)"


def test_an_error_outcome_is_an_error_finding_on_its_op_and_profile() -> None:
    outcomes = (StepOutcome(0, True), StepOutcome(1, True), StepOutcome(2, False, "boom 42"))
    r = judge(RunResult(SCHED, outcomes, Exit.CLEAN))
    assert [(f.kind, f.op, f.profiles, f.message, f.step) for f in r.findings] == [
        ("error", "run", ("dml",), "boom N", 2)
    ]


def test_zeroed_outputs_and_corrupt_copies_are_findings_with_stable_signatures() -> None:
    outcomes = (
        StepOutcome(2, True, check=Check.ZEROED, detail="output 0: all zeros"),
        StepOutcome(3, True, check=Check.CORRUPT, detail="3 of 256 elements changed (zeros)"),
    )
    kinds = [
        (f.kind, f.op, f.message) for f in judge(RunResult(SCHED, outcomes, Exit.CLEAN)).findings
    ]
    assert kinds == [
        ("zeroed", "run", "output N"),
        ("corrupt-copy", "copy", "N of N elements changed (zeros)"),
    ]


def test_a_crash_names_the_signal_and_the_steps_in_flight() -> None:
    r = judge(RunResult(SCHED, (), Exit.CRASH, returncode=-11, signal="SIGSEGV", in_flight=(2,)))
    (f,) = r.findings
    assert (f.kind, f.op, f.message, f.profiles) == ("crash", "run", "SIGSEGV", ("dml",))
    assert "step 2 [run s1]" in f.raw


def test_one_finding_per_signature_the_earliest_step_wins() -> None:
    outcomes = (StepOutcome(2, False, "x 1"), StepOutcome(2, False, "x 2"))
    r = judge(RunResult(SCHED, outcomes, Exit.CLEAN))
    assert len(r.findings) == 1


def test_a_misrouted_trace_line_names_the_serving_and_the_owning_backend() -> None:
    line = {
        "ev": "copy",
        "backend": "mgx",
        "src": {"owner": "dml"},
        "dst": {"owner": "host"},
        "misroute": True,
    }
    (f,) = judge(RunResult(SCHED, (), Exit.CLEAN, trace=(line,))).findings
    assert (f.kind, f.message) == ("misroute", "copy served by mgx, memory owned by dml")


def test_normalise_strips_the_python_class_of_a_plain_ort_failure() -> None:
    raw = "Fail: [ONNXRuntimeError] : 1 : FAIL : HIP failure 1: invalid argument"
    assert normalise(raw) == "HIP failure N: invalid argument"
    assert normalise("RuntimeError: DML: bad handle 7") == "DML: bad handle N"


def test_normalise_drops_the_cxx_source_line_and_function_of_ort_s_own_failures() -> None:
    raw = (
        "Fail: [ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/framework/"
        "utils.cc:221 onnxruntime::common::Status onnxruntime::utils::BatchOrCopyMLValue(const "
        "onnxruntime::SessionState&, std::vector<onnxruntime::IDataTransfer::SrcDstPair>*) "
        "allocator != nullptr was false. Failed to find allocator for device Device:[DeviceType:1 "
        "VendorId:4098]\n"
    )
    assert normalise(raw) == (
        "allocator != nullptr was false. Failed to find allocator for device "
        "Device:[DeviceType:N VendorId:N]"
    )


def test_overlap_clustering_makes_any_failure_after_a_group_one_cluster_per_shape() -> None:
    sched = Schedule(
        2,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="dml", model="mlp"),
            Step(1, Op.CREATE, session="s2", profile="mgx", model="mlp"),
            Step(0, Op.RUN, session="s1", group=1),
            Step(1, Op.RUN_BOUND, session="s2", group=1),
            Step(0, Op.COPY, profile="dml"),
        ),
    )
    assert overlap_shape(sched, 2) == ""  # nothing overlapped yet: the symptom decides
    assert overlap_shape(sched, 5) == "run"  # run beside run_bound is two runs racing
    computes = sched.with_steps(
        replace(s, op=Op.RUN_ASYNC) if s.op is Op.RUN else s for s in sched.steps
    )
    assert overlap_shape(computes, 5) == "run"  # run_async computes as a run does
    error = (StepOutcome(3, False, "Device is lost 7"),)
    zeroed = (StepOutcome(5, True, check=Check.CORRUPT, detail="9 of 256 elements changed"),)
    crash = RunResult(sched, (), Exit.CRASH, returncode=-11, signal="SIGSEGV", in_flight=(4,))
    found = [
        judge(RunResult(sched, error, Exit.CLEAN), by_overlap=True).findings[0],
        judge(RunResult(sched, zeroed, Exit.CLEAN), by_overlap=True).findings[0],
        judge(crash, by_overlap=True).findings[0],
    ]
    assert {f.cluster for f in found} == {"overlap|run"}
    assert len({f.signature for f in found}) == 3  # the symptoms are still told apart
    plain = judge(RunResult(sched, error, Exit.CLEAN)).findings[0]
    assert plain.cluster == "error|run|Device is lost N"
    # A worker killed between steps (an EP's own thread aborting after step 4) follows the
    # group too, as one did on the H200 after `[create || create]`, not a cluster of its own.
    done = tuple(StepOutcome(i, True) for i in range(5))
    between = RunResult(sched, done, Exit.CRASH, returncode=-6, signal="SIGABRT")
    (f,) = judge(between, by_overlap=True).findings
    assert (f.step, f.cluster) == (None, "overlap|run")
    assert judge(between).findings[0].cluster == "crash|SIGABRT|none"


def test_normalise_strips_ort_status_words_after_a_pybind_location() -> None:
    raw = (
        "RuntimeError: /onnxruntime_src/onnxruntime/python/onnxruntime_pybind_state.cc:571 "
        "pybind11::array onnxruntime::python::PrimitiveTensorToNumpyFromDevice(const OrtValue&, "
        "const DataTransferAlternative&) [ONNXRuntimeError] : 1 : FAIL : DML failure: 0x80070057 "
        "invalid allocation handle\n"
    )
    assert normalise(raw) == "DML failure: <addr> invalid allocation handle"


def test_a_crash_on_an_ort_thread_is_the_crash_of_the_op_in_flight_that_works_there() -> None:
    sched = Schedule(
        2,
        (
            Step(0, Op.REGISTER),
            Step(0, Op.CREATE, session="s1", profile="mgx", model="mlp"),
            Step(0, Op.CREATE, session="s2", profile="dml", model="mlp"),
            Step(0, Op.RUN_ASYNC, session="s1", group=1),
            Step(1, Op.FEED, session="s2", peer="s1", group=1),
        ),
    )
    # No "Current thread" with Python frames: ORT's pool thread, where run_async computes.
    crash = RunResult(sched, (), Exit.CRASH, returncode=-11, signal="SIGSEGV", in_flight=(3, 4))
    (f,) = judge(crash).findings
    assert (f.op, f.crash_state, f.cluster) == (
        "feed+run_async",
        "run_async",
        "crash|SIGSEGV|run_async",
    )
    plain = replace(crash, in_flight=(4,))  # nothing in flight works on ORT's threads
    assert judge(plain).findings[0].cluster == "crash|SIGSEGV|feed"
