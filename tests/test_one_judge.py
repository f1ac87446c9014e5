"""repro.py judges a replay exactly as racefuzz does.

One event stream, exit status, stderr and trace, told twice: to racefuzz (its `ending.Watch`,
`executor.told` with the target's profiles and EP modules, the shrinker's `RaceSymptoms`) and to a
generated repro.py (the same stream fed to its embedded `Watch`, then its `verdict`), for a
finding drawn from what racefuzz made of the run or from decoys of other symptoms and overlap
shapes. Hypothesis draws 1200 such runs; the two verdicts must agree on every one. A bundle whose
repro.py says 5/5 where racefuzz said 0/20 was this disagreement.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from racefuzz.execute import executor
from racefuzz.judge.ending import Watch
from racefuzz.judge.outcome import Check, Exit, Finding, RunResult
from racefuzz.judge.race_symptoms import RaceSymptoms
from racefuzz.report.repro_script import repro_source
from racefuzz.schedule import contract
from racefuzz.schedule.model import Op, Schedule, Step, problems
from racefuzz.targets import models
from racefuzz.targets.model import Library, Profile, Target
from racefuzz.worker.protocol import Skip

EP = Library("ep", Path("/opt/ep/libdiffep.so"))
PROFILES = (
    Profile("a", "ep", "DiffEP", {}),
    Profile("b", "ep", "DiffEP", {"device_id": "1"}),
    Profile("cpu", None, "CPUExecutionProvider", {}),
)
TARGETS = {
    by: Target("diff", (EP,), PROFILES, ("tiny",), cluster_by=by) for by in ("symptom", "overlap")
}
BLOBS = {"tiny": models.model_bytes("tiny")}


def _schedule(groups: dict[int, int], breach: bool = False) -> Schedule:
    steps = [
        Step(0, Op.REGISTER),
        Step(0, Op.CREATE, session="s1", profile="a", model="tiny"),
        Step(1, Op.CREATE, session="s2", profile="b", model="tiny"),
        Step(0, Op.RUN, session="s1"),
        Step(1, Op.RUN, session="s2"),
        Step(1, Op.CREATE, session="s3", profile="cpu", model="tiny"),
        Step(0, Op.RELEASE, session="s1"),
    ]
    if breach:  # unregister while sessions of the library live: misuse from here on
        steps.insert(4, Step(1, Op.UNREGISTER))
    return Schedule(2, tuple(replace(s, group=groups.get(i)) for i, s in enumerate(steps)))


SCHEDULES = (
    _schedule({}),
    _schedule({1: 1, 2: 1}),  # the creates overlap
    _schedule({3: 1, 4: 1}),  # the runs overlap
    _schedule({1: 1, 2: 1, 3: 2, 4: 2}),
    _schedule({1: 1, 2: 1}, breach=True),
)
MESSAGES = (
    "RunAsync: [ONNXRuntimeError] : 1 : FAIL : DiffEP: the device context was destroyed by a "
    "session release",
    "Error when bind input: DiffEP: the device context was destroyed by a session release",
    "no EP device for profile 'a' (DiffEP)",
    "Fail",
    "hip failure 12: invalid argument",
)
CHECKS = tuple(c for c in Check if c is not Check.OK)
FAULTHANDLER = (
    "Fatal Python error: Segmentation fault\n\n"
    'Thread 0x00007f01 (most recent call first):\n  File "/w/ops.py", line 9 in op_copy\n\n'
    'Current thread 0x00007f02 (most recent call first):\n  File "/w/ops.py", line 20 in {op}\n'
    '  File "/w/sequencer.py", line 5 in step\n'
)
NATIVE = (
    "Native stack of the faulting thread (most recent call first):\n"
    "  #0 /opt/ep/libdiffep.so+0x1a2b (FindPool)\n  #1 /usr/lib/libonnxruntime.so+0x99\n"
)
ASAN = (
    "==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x602 at pc 0x7f\n"
    "READ of size 8 at 0x602 thread T3\n"
    "    #0 0x7f in shared::FindPool(int) /src/shared.cc:12 (libdiffep.so+0x1a2b)\n"
    "    #1 0x7f in Compute /src/ep.cc:40 (libdiffep.so+0x2000)\n"
    "SUMMARY: AddressSanitizer: heap-use-after-free /src/shared.cc:12 in shared::FindPool(int)\n"
)
TRACE_LINE = {"ev": "copy", "misroute": True, "backend": "dml", "src": {"owner": "mgx"}}


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    """A worker run as its watcher saw it: events, exit status, stderr, trace, a kill."""
    schedule = draw(st.sampled_from(SCHEDULES))
    n = len(schedule.steps)
    reached = draw(st.integers(0, n + 1))  # steps started, teardown (index n) included
    flying = draw(st.sets(st.integers(0, max(reached - 1, 0)), max_size=2)) if reached else set()
    events: list[dict[str, Any]] = [{"ev": "ready"}]
    for i in range(reached):
        events.append({"ev": "start", "step": i})
        if i in flying:
            continue
        done: dict[str, Any] = {"ev": "done", "step": i, "ok": True, "ms": 1.0}
        what = draw(st.sampled_from(("ok", "ok", "error", "check", "skip")))
        if what == "error":
            done.update(ok=False, message=draw(st.sampled_from(MESSAGES)))
        elif what == "check":
            done.update(check=draw(st.sampled_from(CHECKS)).value, detail="output 0: max 3.2")
        elif what == "skip":
            done.update(skipped=draw(st.sampled_from(list(Skip))).value, detail="not made")
        events.append(done)
    clean = reached == n + 1 and not flying
    if clean and draw(st.booleans()):
        events.append({"ev": "end"})
    op = draw(st.sampled_from(("op_run", "op_copy", "teardown", "main")))
    parts = draw(st.sets(st.sampled_from(("faulthandler", "native", "asan")), max_size=3))
    stderr = "".join(
        {"faulthandler": FAULTHANDLER.format(op=op), "native": NATIVE, "asan": ASAN}[p]
        for p in sorted(parts)
    )
    return {
        "schedule": schedule,
        "events": events,
        "returncode": draw(st.sampled_from((0, 0, 0, 0, -11, -6, -9, -15, 1, 66, 70))),
        "killed_for": draw(st.sampled_from((None, None, None, Exit.HANG, Exit.LEAK))),
        "stderr": stderr,
        "trace": (dict(TRACE_LINE),) if draw(st.booleans()) and draw(st.booleans()) else (),
    }


def _fed(watch: Any, run: dict[str, Any], exit_type: Any) -> Any:
    """`watch` (racefuzz's or repro.py's) after the run's events, killed at a limit where the
    run was (as `Watch.limit` marks it); `exit_type`: that side's `Exit`."""
    for t, ev in enumerate(run["events"]):
        watch.event(ev, 100.0 + t)
    if run["killed_for"] is not None:
        watch.killed_for = exit_type(run["killed_for"].value)
    return watch


def _ours(run: dict[str, Any], target: Target) -> RunResult:
    watch = _fed(Watch(run["schedule"], 20.0, 180.0, 4096.0, 100.0), run, Exit)
    return executor.told(
        target, watch.result(run["returncode"], 200.0), run["stderr"], run["trace"]
    )


def _decoys(found: tuple[Finding, ...]) -> list[Finding]:
    """Findings of other symptoms and overlap shapes than the run's own."""
    base = [
        Finding("zeroed", "run", "output N", ("a",), 3, "output 0: all zeros"),
        Finding("crash", "run", "SIGSEGV", ("a",), 3, "worker died"),
        Finding("error", "create", "no EP device for profile '…' (DiffEP)", ("a",), 1, "x"),
    ]
    shapes = ("create", "run", "create+run", "copy+run")
    out = [replace(f, overlap=s) for f in base for s in shapes] + base
    out += [replace(f, overlap=s) for f in found for s in shapes]
    return out


@pytest.fixture(scope="module")
def repro_judge() -> Iterator[SimpleNamespace]:
    """repro.py's embedded judge, loaded from a generated script; racefuzz's own modules in
    this process are put back afterwards (the script loads its copies under their names)."""
    ns = _script(SCHEDULES[0], Finding("error", "run", "x", ("a",), 3, "x"), TARGETS["symptom"])
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("racefuzz")}
    try:  # as in repro.py's own process, where no racefuzz package exists
        yield ns["load_judge"]()
    finally:
        for name in [k for k in sys.modules if k.startswith("racefuzz")]:
            del sys.modules[name]
        sys.modules.update(saved)


def _script(schedule: Schedule, finding: Finding, target: Target) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "repro"}
    exec(compile(repro_source(schedule, finding, target, BLOBS), "repro.py", "exec"), ns)
    return ns


@pytest.mark.slow
@settings(
    max_examples=1200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(run=runs(), by=st.sampled_from(sorted(TARGETS)), data=st.data())
def test_repro_py_and_racefuzz_give_every_run_the_same_verdict(
    repro_judge: SimpleNamespace, run: dict[str, Any], by: str, data: st.DataObject
) -> None:
    target = TARGETS[by]
    schedule: Schedule = run["schedule"]
    assert not problems(schedule, library_of=target.library_of)
    ours = _ours(run, target)
    finding = data.draw(st.sampled_from([*ours.findings, *_decoys(ours.findings)]))
    symptom = finding.symptom if finding.overlap else ""
    # A step replayed alone (for a race's other symptoms) fails as the run did, or not at all.
    alone = [replace(f, overlap="") for f in ours.findings] if data.draw(st.booleans()) else []
    racefuzz_says = (
        RaceSymptoms(finding.cluster, symptom, lambda _: alone).evidence(schedule, ours.findings)
        is not None
    )

    ns = _script(schedule, finding, target)
    embedded = repro_judge.json_io.from_json_obj(ns["SCHEDULE"], library_of=ns["library_of"])
    theirs = repro_judge.ending.Watch(embedded, 20.0, 180.0, 4096.0, 100.0)
    _fed(theirs, run, repro_judge.outcome.Exit)
    theirs_alone = [repro_judge.outcome.Finding(**vars(f)) for f in alone]
    race = repro_judge.race_symptoms.RaceSymptoms(
        finding.cluster, ns["FINDING"]["symptom"], lambda _: theirs_alone
    )
    judged = ns["judged"](
        repro_judge, theirs, run["returncode"], run["stderr"], run["trace"], [EP.path.name]
    )
    repro_says, what = ns["verdict"](race, judged)
    event(f"reproduced: {racefuzz_says}; exit: {ours.exit.value}; pinned: {bool(symptom)}")
    event(f"by another symptom of the race: {racefuzz_says and 'another symptom' in what}")
    assert repro_says == racefuzz_says, (finding.cluster, symptom, what, ours.findings)
    if not repro_says and ours.findings and ours.exit is not Exit.KILLED:
        assert what.startswith("something else: "), what


def test_the_runs_drawn_reach_every_verdict(repro_judge: SimpleNamespace) -> None:
    # The property above means something only if its runs reproduce, fail otherwise, die and
    # get killed from outside: one run of each, judged by racefuzz.
    base = {"schedule": SCHEDULES[1], "stderr": "", "trace": (), "killed_for": None}
    started = [{"ev": "ready"}, {"ev": "start", "step": 1}]
    crash = _ours({**base, "events": started, "returncode": -11}, TARGETS["overlap"])
    assert [(f.kind, f.overlap) for f in crash.findings] == [("crash", "create")]
    killed = _ours({**base, "events": started, "returncode": -9}, TARGETS["symptom"])
    assert killed.exit is Exit.KILLED and not killed.findings
    assert contract.first_breach(SCHEDULES[4], TARGETS["symptom"].library_of) is not None
