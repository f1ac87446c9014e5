"""Oracles: turn what a run did into findings with signatures.

- `error`: a step raised (ORT or the EP returned an error status);
- `zeroed` / `mismatch`: a run's outputs were all zeros / differed from the CPU reference;
- `corrupt-copy`: a copy round trip changed bytes;
- `misplaced`: a device output or allocation labelled with another device than the profile's;
- `crash`: the worker died by a signal or an abnormal exit; `hang`: no progress in time;
  `leak`: the worker's memory passed its ceiling (both attributed to the steps in flight);
- `misroute` (testbed only, white-box): the trace shows a copy or compute served by a backend
  that does not own the memory it touched;
- `abi`: racefuzz's EP-ABI validation layer (a target's `[layer]` flavour) saw an ownership
  rule broken: another backend's memory in a copy or kernel, a free through the wrong
  allocator, a use after free or release;
- `asan` / `tsan`: an EP built with a sanitizer reported (`sanitizer_report`), whatever the
  outputs were; it replaces the crash finding of the sanitizer's own exit.

A signature (kind, op, profiles, normalised message) identifies a bug across runs: numbers,
addresses and quoted names are stripped so that two runs of one bug share it. Which findings
count (order-induced vs fails alone too) is decided by `baseline`, not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from racefuzz.judge import identity, sanitizer_report
from racefuzz.judge.identity import ClusterKey
from racefuzz.judge.outcome import Check, Exit, Finding, RunResult
from racefuzz.schedule import contract
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import SPECS
from racefuzz.targets import sanitizer

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"(?<![A-Za-z])\d+(\.\d+)?")
_QUOTED = re.compile(r"'[^']*'")
_PATH = re.compile(r"(/|[A-Za-z]:\\)[^\s:'\"]+")
_SPACE = re.compile(r"\s+")
_CXX_WHERE = re.compile(r"^\S+\.(cc|cpp|h):\d+ [^(]*\((?:[^()]|\([^()]*\))*\)\s*(const\s*)?")
# ORT wraps EP errors in boilerplate that names nodes and graphs; the EP's own words follow.
_ORT_STATUS = re.compile(r"Status Message:\s*(.*)$", re.S)
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*")


def normalise(message: str) -> str:
    """The part of an error message that stays the same across runs of one bug."""
    text = message.strip()
    m = _ORT_STATUS.search(text)
    if m:
        text = m.group(1)
    # The Python exception class: ORT's ("Fail: [ONNXRuntimeError] ...") or any *Error.
    text = re.sub(r"^(\w+:\s*(?=\[ONNXRuntimeError\])|\w*(Error|Exception):\s*)", "", text)
    text = _ORT_PREFIX.sub("", text)
    # ORT's own failures name the C++ source line and function before the words that matter:
    # ".../utils.cc:221 onnxruntime::common::Status onnxruntime::utils::F(...) <words>".
    text = _CXX_WHERE.sub("", text)
    text = _ORT_PREFIX.sub("", text)  # pybind's errors put it after the C++ location
    text = _PATH.sub("<path>", text)
    text = _QUOTED.sub("'…'", text)
    text = _HEX.sub("<addr>", text)
    text = _NUM.sub("N", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:160]


TEARDOWN = "teardown"  # the worker's last step: dropping what the schedule left alive


def _profiles(schedule: Schedule, steps: tuple[int, ...] | list[int]) -> tuple[str, ...]:
    n = len(schedule.steps)
    found = {p for i in steps if i < n and (p := schedule.step_profile(i)) is not None}
    return tuple(sorted(found))


def _op(schedule: Schedule, i: int) -> str:
    return str(schedule.steps[i].op) if i < len(schedule.steps) else TEARDOWN


def _ops(schedule: Schedule, steps: tuple[int, ...] | list[int]) -> str:
    return "+".join(sorted({_op(schedule, i) for i in steps})) or "none"


def step_findings(result: RunResult) -> list[Finding]:
    out: list[Finding] = []
    sched = result.schedule
    for o in result.outcomes:
        op = _op(sched, o.step)
        profiles = _profiles(sched, [o.step])
        if not o.ok:
            out.append(Finding("error", op, normalise(o.message), profiles, o.step, o.message))
        elif o.check is not None and o.check is not Check.OK:
            kind = str(o.check)
            detail = re.sub(r"[\d.]+(e-?\d+)?", "N", o.detail.split(":")[0])
            out.append(Finding(kind, op, detail, profiles, o.step, o.detail))
    return out


def exit_finding(result: RunResult, ep_modules: Sequence[str] = ()) -> Finding | None:
    if result.exit in (Exit.CLEAN, Exit.KILLED):
        return None
    steps = list(result.in_flight)
    if not steps and result.exit is Exit.LEAK and result.outcomes:
        # Memory is read after each step done: a ceiling passed between steps is the last
        # step's doing, not a leak of no op (that would be a cluster of its own, "leak|none").
        steps = [max(o.step for o in result.outcomes)]
    sched = result.schedule
    first = steps[0] if steps else None
    if result.exit is Exit.CRASH:
        what = result.signal or f"exit code {result.returncode}"
        raw = f"worker died ({what}) during {_describe(sched, steps)}"
        state = crash_state(result.stacks) or _on_ort_thread(sched, steps)
        return Finding(
            "crash",
            _ops(sched, steps),
            what,
            _profiles(sched, steps),
            first,
            raw,
            crash_state=state,
            frame=ep_frame(result.stacks, ep_modules),
        )
    kind = "hang" if result.exit is Exit.HANG else "leak"
    raw = f"{kind} during {_describe(sched, steps)}"
    message = "no progress" if kind == "hang" else "memory ceiling"
    return Finding(kind, _ops(sched, steps), message, _profiles(sched, steps), first, raw)


NATIVE_HEADER = "Native stack of the faulting thread (most recent call first):"
# A crash tracer frame, named by addr2line ("  #0 f(int) at a.cc (libep.so+0x12)") or not
# ("  #0 /lib/libep.so+0x12 (nearest_symbol)").
_NAMED_FRAME = re.compile(r"^  #\d+ (.+) \(([^()\s]+)\+0x[0-9a-f]+\)$")
_RAW_FRAME = re.compile(r"^  #\d+ (\S+)\+0x([0-9a-f]+)(?: \((.*)\))?$")


def ep_frame(stacks: str, ep_modules: Sequence[str]) -> str:
    """The innermost frame of the faulting thread's native stack that lies in one of the EP
    libraries `ep_modules` (file names), as a function name where addr2line named it, else the
    library and offset (the same build gives the same offset); '' when none does."""
    at = stacks.find(NATIVE_HEADER)
    if at < 0 or not ep_modules:
        return ""
    for line in stacks[at:].splitlines()[1:]:
        if not line.startswith("  #"):
            break
        named = _NAMED_FRAME.match(line)
        if named is not None and named.group(2) in ep_modules:
            return named.group(1)
        raw = _RAW_FRAME.match(line)
        if raw is not None and raw.group(1).rsplit("/", 1)[-1] in ep_modules:
            return f"{raw.group(1).rsplit('/', 1)[-1]}+0x{raw.group(2)}"
    return ""


_CURRENT = re.compile(r"^Current thread [^\n]*\n((?:[ \t]+[^\n]*\n?)*)", re.M)
_FRAME = re.compile(r'File "[^"]*", line \d+ in (\w+)')


def crash_state(stacks: str) -> str:
    """The faulting thread's state from faulthandler's dump: the worker op it was in.

    faulthandler names the thread that took the signal "Current thread"; its innermost frame
    inside a worker op handler (`op_run`, ...) or `teardown` says what crashed, whatever else
    was in flight. '' when the signal came on a thread with no Python frames (an EP's or ORT's
    own thread): the caller asks which op in flight works on ORT's threads, else falls back to
    the ops in flight.
    """
    m = _CURRENT.search(stacks)
    if m is None:
        return ""
    for name in _FRAME.findall(m.group(1)):
        if name.startswith("op_"):
            return str(name[3:])
        if name == TEARDOWN:
            return TEARDOWN
    return ""


def _on_ort_thread(schedule: Schedule, steps: list[int]) -> str:
    """The faulting thread had no Python frame, so it was ORT's or the EP's own: when exactly
    one kind of op in flight works on ORT's threads (`OpSpec.on_ort_thread`), that op; else ''
    (then the ops in flight stand in)."""
    ops = {
        schedule.steps[i].op
        for i in steps
        if i < len(schedule.steps) and SPECS[schedule.steps[i].op].on_ort_thread
    }
    return next(iter(ops)).value if len(ops) == 1 else ""


def _describe(schedule: Schedule, steps: list[int]) -> str:
    if not steps:
        return "no step (between steps)"
    return ", ".join(
        f"step {i} [{schedule.steps[i].describe() if i < len(schedule.steps) else TEARDOWN}]"
        for i in steps
    )


def misroute_findings(result: RunResult) -> list[Finding]:
    out: list[Finding] = []
    for line in result.trace:
        if not line.get("misroute"):
            continue
        served = str(line.get("backend", "?"))
        touched = {b.get("owner") for b in trace_buffers(line)} - {None, "host"}
        owners = sorted(str(o) for o in touched)
        message = f"{line.get('ev', '?')} served by {served}, memory owned by {'/'.join(owners)}"
        out.append(Finding("misroute", str(line.get("ev", "?")), message, (), None, str(line)))
    return out


def abi_findings(result: RunResult) -> list[Finding]:
    """The EP-ABI layer's reports (`targets.layer`), one finding each: its op the ABI call
    that broke an ownership rule, its message the rule and both owners."""
    return [
        Finding(
            "abi",
            str(line.get("call", "?")),
            normalise(f"{line.get('check', '?')}: {line.get('message', '')}"),
            (),
            None,
            str(line),
        )
        for line in result.trace
        if line.get("ev") == "abi"
    ]


def trace_buffers(line: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The buffers a testbed trace line touches (copy src/dst, alloc buffer, compute in/out)."""
    found = [line[k] for k in ("src", "dst", "buffer") if isinstance(line.get(k), dict)]
    for key in ("inputs", "outputs"):
        if isinstance(line.get(key), list):
            found += [b for b in line[key] if isinstance(b, dict)]
    return found


def sanitizer_findings(result: RunResult, ep_modules: Sequence[str]) -> list[Finding]:
    """One finding per sanitizer report, placed on the steps in flight when it was written."""
    sched, steps = result.schedule, list(result.in_flight)
    return [
        Finding(
            sanitizer_report.kind(text),
            _ops(sched, steps),
            sanitizer_report.summary(text, ep_modules),
            _profiles(sched, steps),
            steps[0] if steps else None,
            text,
        )
        for text in result.sanitizer_reports
    ]


def judge(
    result: RunResult,
    library_of: contract.LibraryOf | None = None,
    ep_modules: Sequence[str] = (),
    by_overlap: bool = False,
) -> RunResult:
    """The result with its findings, one per signature (the earliest step wins).

    A finding at or after the schedule's first breach of ORT's contract (`schedule.contract`,
    with `library_of` mapping profiles to EP libraries), or in the breach's overlap group, is
    labelled misuse; so is one with no step to place it (a misroute), since the breach may be
    what caused it. `ep_modules` are the
    file names of the EP libraries, whose frames identify a sanitizer report. `by_overlap`
    (the target's `cluster_by = "overlap"`) tags each finding with its overlap group's shape.
    """
    found = step_findings(result)
    reports = sanitizer_findings(result, ep_modules)
    crash = exit_finding(result, ep_modules)
    # The sanitizer's own exit after its report is not a second finding.
    if crash is not None and not (reports and result.returncode == sanitizer.EXIT_CODE):
        found.append(crash)
    found.extend(reports)
    found.extend(misroute_findings(result))
    found.extend(abi_findings(result))
    breach = contract.first_breach(result.schedule, library_of)
    if breach is not None:
        # Steps of one overlap group run in any order: the breach may come first in any of them.
        groups = result.schedule.groups()
        since = next((a for a, b in groups if a <= breach.step < b), breach.step)
        found = [
            replace(f, misuse=f"step {breach.step}: {breach.rule}")
            if f.step is None or f.step >= since
            else f
            for f in found
        ]
    if by_overlap:
        found = [
            replace(f, overlap=overlap_shape(result.schedule, result.placed_at(f))) for f in found
        ]
    unique: dict[str, Finding] = {}
    for f in found:
        unique.setdefault(f.signature, f)
    return replace(result, findings=tuple(unique.values()))


def overlap_shape(schedule: Schedule, step: int) -> str:
    """The kinds of call (`OpSpec.race_kind`) that overlapped in the last group that began at or
    before `step`, e.g. "run" for two runs or "copy+create"; "" when no group did (then the order
    alone broke it, and the symptom is the identity). A group of one step overlaps nothing (the
    shrinker leaves such groups when it takes a step out of a pair), so it does not count."""
    shape = ""
    for start, stop in schedule.groups():
        if start > step:
            break
        if stop - start < 2:
            continue
        kinds = {SPECS[s.op].race_kind for s in schedule.steps[start:stop]}
        shape = "+".join(sorted(kinds))
    return shape


def evidence(findings: Sequence[Finding], cluster: str, symptom: str = "") -> Finding | None:
    """The first of a judged run's findings that shows `cluster` again (a cluster key's text,
    or a finding's whole signature), by `identity.shows`; `symptom` (a key's text, "" for
    none) pins the failure an overlap cluster's runs must show. The one test by which the
    shrinker, the campaign and repro.py count a run as a reproduction."""
    wanted = ClusterKey.parse(cluster)
    pinned = ClusterKey.parse(symptom) if symptom else None
    for f in findings:
        if cluster == f.signature or identity.shows(wanted, pinned, f.symptom_key, f.overlap):
            return f
    return None
