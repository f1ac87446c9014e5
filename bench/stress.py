"""The stress baseline: what an EP developer writes by hand instead of racefuzz.

One process registers the EP, then N threads hammer it with random calls (create, run,
run_bound, copy, alloc, read, free, release) on shared pools of sessions and device values,
until the time is up. Nothing controls the order of ORT calls: the only lock keeps the Python
pools consistent (a session is not released while a thread is running it, so no thread ever
touches a dead Python object). The calls and their checks are racefuzz's own
(`racefuzz.worker.ops.Runtime`: CPU-reference comparison of outputs, byte-exact copy round
trips), and so is the op mix (`racefuzz.strategies.base.OP_WEIGHTS`), so that the comparison
with racefuzz isolates what racefuzz adds: control over the order and shrinkable schedules.
Registration happens once, up front, as a hand-written stress test does; it never unregisters.

Detection uses the signal racefuzz uses: a step that raised (`error`), a `zeroed`, `mismatch` or
`corrupt-copy` check, or the process dying (`crash`). The child prints each new finding as a JSON
line the moment it happens; the parent (`run_stress`) timestamps it, applies the caller's
`stop` predicate, and starts a fresh child after a crash, on the same clock, until the cap.

`python -m bench.stress --target testbed:B3 --seconds 10` runs it alone and prints findings.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from racefuzz.execute.executor import kill_tree
from racefuzz.judge.oracles import normalise
from racefuzz.judge.outcome import Finding
from racefuzz.schedule.model import Op
from racefuzz.strategies.base import OP_WEIGHTS, SMALLEST_MODEL_BIAS
from racefuzz.targets import models
from racefuzz.targets.model import TRACE_ENV, Target
from racefuzz.targets.registry import load_target

REPO = Path(__file__).resolve().parent.parent
MAX_SESSIONS = 4  # alive at once, as racefuzz's generators keep it
MAX_VALUES = 2
# Ops a thread may pick; registration happens once before the threads start.
OPS: tuple[Op, ...] = tuple(op for op in OP_WEIGHTS if op not in (Op.REGISTER, Op.UNREGISTER))
_FINDING_CHECKS = ("zeroed", "mismatch", "corrupt-copy")


@dataclass
class _Live:
    profile: str
    users: int = 0  # threads using it right now; it may be released only at 0


class Pools:
    """Sessions and device values shared by the threads; every method holds the one lock."""

    def __init__(self, profiles: tuple[str, ...], models: tuple[str, ...]) -> None:
        self.profiles = profiles
        self.models = models
        self.sessions: dict[str, _Live] = {}
        self.values: dict[str, _Live] = {}
        self._busy: set[str] = set()  # names being created or released: in neither pool
        self._lock = threading.Lock()

    def pick(self, rng: random.Random) -> dict[str, Any] | None:
        """A random step among those the pools allow now (claiming what it uses), or None."""
        with self._lock:
            choices = [op for op in OPS if self._enabled(op)]
            if not choices:
                return None
            op = rng.choices(choices, weights=[OP_WEIGHTS[o] for o in choices])[0]
            return self._claim(op, rng)

    def _free_name(self, prefix: str, pool: Mapping[str, _Live], limit: int) -> str | None:
        names = [f"{prefix}{k}" for k in range(1, limit + 1)]
        free = [n for n in names if n not in pool and n not in self._busy]
        return free[0] if free else None

    def _enabled(self, op: Op) -> bool:
        if op is Op.CREATE:
            return self._free_name("s", self.sessions, MAX_SESSIONS) is not None
        if op in (Op.RUN, Op.RUN_BOUND):
            return bool(self.sessions)
        if op is Op.RELEASE:
            return any(s.users == 0 for s in self.sessions.values())
        if op is Op.ALLOC:
            return self._free_name("v", self.values, MAX_VALUES) is not None
        if op is Op.READ:
            return bool(self.values)
        if op is Op.FREE:
            return any(v.users == 0 for v in self.values.values())
        return op is Op.COPY

    def _claim(self, op: Op, rng: random.Random) -> dict[str, Any]:
        step: dict[str, Any] = {"op": str(op)}
        if op is Op.CREATE:
            name = self._free_name("s", self.sessions, MAX_SESSIONS)
            assert name is not None
            self._busy.add(name)
            small = rng.random() < SMALLEST_MODEL_BIAS
            model = self.models[0] if small else rng.choice(self.models)
            step |= {"session": name, "profile": rng.choice(self.profiles), "model": model}
        elif op in (Op.RUN, Op.RUN_BOUND):
            name = rng.choice(sorted(self.sessions))
            self.sessions[name].users += 1
            step |= {"session": name, "profile": self.sessions[name].profile}
        elif op is Op.RELEASE:
            name = rng.choice(sorted(n for n, s in self.sessions.items() if s.users == 0))
            step |= {"session": name, "profile": self.sessions.pop(name).profile}
            self._busy.add(name)
        elif op is Op.ALLOC:
            name = self._free_name("v", self.values, MAX_VALUES)
            assert name is not None
            self._busy.add(name)
            step |= {"value": name, "profile": rng.choice(self.profiles)}
        elif op is Op.READ:
            name = rng.choice(sorted(self.values))
            self.values[name].users += 1
            step |= {"value": name, "profile": self.values[name].profile}
        elif op is Op.FREE:
            name = rng.choice(sorted(n for n, v in self.values.items() if v.users == 0))
            step |= {"value": name, "profile": self.values.pop(name).profile}
            self._busy.add(name)
        else:
            step["profile"] = rng.choice(self.profiles)
        return step

    def done(self, step: Mapping[str, Any], ok: bool) -> None:
        """Return what `pick` claimed; a failed create or alloc leaves its name free."""
        op = Op(step["op"])
        with self._lock:
            if op is Op.CREATE and ok:
                self.sessions[step["session"]] = _Live(step["profile"])
            elif op is Op.ALLOC and ok:
                self.values[step["value"]] = _Live(step["profile"])
            elif op in (Op.RUN, Op.RUN_BOUND):
                self.sessions[step["session"]].users -= 1
            elif op is Op.READ:
                self.values[step["value"]].users -= 1
            self._busy.discard(step.get("session") or step.get("value") or "")


def finding_of(step: Mapping[str, Any], outcome: Mapping[str, Any]) -> dict[str, Any] | None:
    """The finding an outcome of `Runtime.step` shows, as a JSON-ready dict, or None."""
    base = {"op": step["op"], "profiles": [step["profile"]]}
    if not outcome.get("ok", False):
        return {**base, "kind": "error", "message": str(outcome.get("message", ""))}
    check = outcome.get("check")
    if check in _FINDING_CHECKS:
        return {**base, "kind": check, "message": str(outcome.get("detail", ""))}
    return None


# --- the child: the stress test itself ---------------------------------------------------------


def _child(job: Mapping[str, Any], out: IO[str]) -> None:
    from racefuzz.worker.base import Profile  # imports onnxruntime: child only
    from racefuzz.worker.ops import Runtime

    profiles = {n: Profile.from_json(n, d) for n, d in job["profiles"].items()}
    runtime = Runtime(job["libraries"], profiles, job["models"], int(job["seed"]))
    pools = Pools(tuple(job["profiles"]), tuple(job["models"]))
    lock = threading.Lock()
    seen: set[str] = set()
    counter = iter(range(1, 2**62))  # next() on an iterator is atomic under the GIL
    done = [0] * int(job["threads"])  # calls finished, per thread (no shared counter to race)

    def report(step: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        found = finding_of(step, outcome)
        if found is None:
            return
        key = f"{found['kind']}|{found['op']}|{found['profiles']}|{normalise(found['message'])}"
        with lock:
            if key not in seen:
                seen.add(key)
                out.write(json.dumps({"ev": "finding", "ops": sum(done), **found}) + "\n")
                out.flush()

    report({"op": "register", "profile": ""}, runtime.step(0, {"op": "register"}).to_json())
    # The parent's deadline, not one counted from this child's start: a child that took
    # seconds to import onnxruntime on a loaded machine would otherwise report after the
    # parent stopped waiting, and its calls were lost (0 calls in an 8 s stress).
    deadline = float(job["until"])

    def hammer(k: int) -> None:
        rng = random.Random(int(job["seed"]) * 1_000_003 + k)
        while time.monotonic() < deadline:
            step = pools.pick(rng)
            if step is None:
                time.sleep(0.001)
                continue
            outcome = runtime.step(next(counter), step).to_json()
            pools.done(step, bool(outcome.get("ok")))
            done[k] += 1
            report(step, outcome)

    threads = [
        threading.Thread(target=hammer, args=(k,), daemon=True) for k in range(job["threads"])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + 30)
    out.write(json.dumps({"ev": "end", "ops": sum(done)}) + "\n")
    out.flush()


def child_main() -> None:
    import faulthandler

    from racefuzz.worker.main import protocol_stream

    faulthandler.enable(file=sys.stderr, all_threads=True)
    out = protocol_stream()  # native prints go to stderr, not into the JSON lines
    _child(json.loads(sys.stdin.read()), out)
    sys.stderr.flush()
    os._exit(0)  # as racefuzz's worker: interpreter teardown with live sessions is not tested


# --- the parent: timestamps, stop predicate, restarts --------------------------------------------


@dataclass(frozen=True)
class Seen:
    seconds: float  # since run_stress started
    finding: Finding


@dataclass(frozen=True)
class StressResult:
    found_s: float | None  # when `stop` first held; None: not within the cap
    seen: tuple[Seen, ...]  # every finding, in order
    ops: int  # calls made, as far as the children reported before they ended or were stopped
    runs: int  # children started (a crash starts another)
    seconds: float


# How long after the deadline a child may take to report its end (its calls) on a busy machine.
END_GRACE_S = 5.0


def job_for(target: Target, seconds: float, seed: int, threads: int) -> dict[str, Any]:
    return {
        "libraries": {lib.name: str(lib.path) for lib in target.libraries},
        "profiles": {p.name: p.to_json() for p in target.profiles},
        "models": {m: str(models.model_path(m)) for m in target.models},
        "seed": seed,
        "threads": threads,
        "until": time.monotonic() + seconds,  # CLOCK_MONOTONIC: one clock for every process
    }


def _pump(stream: IO[str], q: queue.Queue[dict[str, Any] | None]) -> None:
    for line in stream:
        try:
            q.put(json.loads(line))
        except ValueError:
            continue
    q.put(None)


def _reap(proc: subprocess.Popen[str]) -> int | None:
    """The exit code of a child whose output has ended, or None if it does not exit soon."""
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def run_stress(
    target: Target,
    *,
    seconds: float,
    seed: int = 0,
    threads: int = 4,
    stop: Callable[[Finding], bool] | None = None,
) -> StressResult:
    """Stress `target` for `seconds` (wall clock, start-up included); stop early when `stop`."""
    t0 = time.monotonic()
    seen: list[Seen] = []
    ops = runs = 0
    env = {**os.environ, **target.env}
    env.pop(TRACE_ENV, None)  # no white-box trace: stress is black-box
    while (left := seconds - (time.monotonic() - t0)) > 0.05:
        job = job_for(target, left, seed + runs, threads)
        runs += 1
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.stress", "--child"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, events), daemon=True).start()
        stopped = ended = False
        calls = 0  # of this child, as of its last event
        while True:
            remaining = seconds - (time.monotonic() - t0)
            try:
                ev = events.get(timeout=max(remaining, 0.0) + END_GRACE_S)
            except queue.Empty:
                break  # the cap passed with the child stuck (a hang): not a detection here
            if ev is None:
                ended = True
                break
            if ev.get("ev") == "end":
                calls = int(ev.get("ops", 0))
            elif ev.get("ev") == "finding":
                calls = int(ev.get("ops", 0))
                f = Finding(
                    kind=ev["kind"],
                    op=ev["op"],
                    message=normalise(ev["message"]),
                    profiles=tuple(ev["profiles"]),
                    raw=ev["message"],
                )
                seen.append(Seen(time.monotonic() - t0, f))
                if stop is not None and stop(f):
                    stopped = True
                    break
        ops += calls
        code = _reap(proc) if ended else None
        if code is None:
            kill_tree(proc.pid)
            proc.wait()
        if stopped:
            return StressResult(seen[-1].seconds, tuple(seen), ops, runs, time.monotonic() - t0)
        if code:  # died on its own before the end: a crash, as racefuzz's oracles say
            crash = Finding("crash", "unknown", f"exit status {code}", (), raw=f"status {code}")
            seen.append(Seen(time.monotonic() - t0, crash))
            if stop is not None and stop(crash):
                return StressResult(seen[-1].seconds, tuple(seen), ops, runs, time.monotonic() - t0)
    return StressResult(None, tuple(seen), ops, runs, time.monotonic() - t0)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.stress", description=__doc__.split("\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--target", default="testbed")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.child:
        child_main()
    result = run_stress(
        load_target(args.target), seconds=args.seconds, seed=args.seed, threads=args.threads
    )
    for s in result.seen:
        f = s.finding
        print(f"{s.seconds:7.2f}s  {f.kind} on {f.op} [{','.join(f.profiles)}]: {f.message}")
    print(f"{result.ops} calls, {result.runs} process(es), {result.seconds:.1f} s")


if __name__ == "__main__":
    main()
