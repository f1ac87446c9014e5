"""Builds `repro.py`: a stand-alone script that replays one finding on a machine without racefuzz.

An EP developer receiving a ticket has onnxruntime, numpy and their own EP build, not racefuzz,
so the script embeds all a replay needs: the source of racefuzz's worker ops and sequencer (exec'd
into module namespaces: the replay runs the code racefuzz ran, not a hand-written copy), that of
`oracles.normalise`, the schedule, the resolved profiles, the models (base64 ONNX), the target's
environment (with a sanitizer's preload and options) and the finding's kind, op and normalised
message; a sanitizer finding is judged by the embedded `sanitizer_report`. Each replay runs in a
child process, so a crash or a hang is observed, not fatal. The target's environment applies only
where the caller's does not set a variable: `RACEFUZZ_TESTBED_BUGS= python repro.py ...` runs
the testbed's fixed design. This module only builds text; it never runs the script.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any

from racefuzz.judge.outcome import Finding
from racefuzz.report.repro_parts import (
    embedded_sources,
    libraries_registered,
    literal,
    normalise_source,
    repro_env,
    text_timeline,
    usage,
)
from racefuzz.report.repro_verdict import VERDICT_SOURCE
from racefuzz.schedule.json_io import to_json_obj
from racefuzz.schedule.model import Schedule
from racefuzz.schedule.op_table import SPECS, Op
from racefuzz.targets.model import Target
from racefuzz.worker import WORKER_BUG_EXIT

DEFAULT_TIMES = 20
# What the script judges replays by, and shows.
_FINDING = ("kind", "op", "message", "raw", "overlap")

# The script's logic. `@@NAME@@` markers are filled by `repro_source`; the data constants come
# last so that a reader meets the logic first. It must run on Python >= 3.10 with only
# onnxruntime and numpy installed.
_TEMPLATE = r'''#!/usr/bin/env python3
"""racefuzz reproduction: @@TITLE@@

Usage: python repro.py@@USAGE@@ [--times N] [--step-timeout S] [--seed N]

Needs Python >= 3.10, onnxruntime and numpy only. Each replay runs the schedule in a child
process, on real threads in the exact order written, with racefuzz's own sequencer and ops
(embedded below). Exit code: 1 if the finding reproduced at least once, 0 if not, 2 for bad
arguments. The target's environment (TARGET_ENV) applies only to variables the caller's
environment does not set, so `NAME= python repro.py ...` overrides one.
"""

from __future__ import annotations

import argparse, base64, contextlib, json, linecache, os, queue, signal, subprocess, sys
import tempfile, threading, time, types

GRACE_S = 1.5  # after a step timeout: time for the child's stack dump to reach stderr


class Usage(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Usage(message)


def load_module(name, source):
    filename = f"<repro.py: embedded {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module  # dataclasses looks the module up while building classes
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def child(job):
    """Run the schedule with racefuzz's own worker code, embedded below under its real names."""
    for package in ("racefuzz", "racefuzz.worker"):  # so the worker's own imports resolve
        sys.modules.setdefault(package, types.ModuleType(package))
    sys.modules["racefuzz.worker"].WORKER_BUG_EXIT = WORKER_BUG_EXIT
    load_module("racefuzz.worker.handoff", HANDOFF_SOURCE)
    load_module("racefuzz.worker.runs", RUNS_SOURCE)
    load_module("racefuzz.worker.env_api", ENV_API_SOURCE)
    load_module("racefuzz.worker.ops", OPS_SOURCE)
    load_module("racefuzz.worker.sequencer", SEQUENCER_SOURCE)
    load_module("racefuzz.worker.lifeline", LIFELINE_SOURCE)
    load_module("racefuzz.worker.native_trace", NATIVE_TRACE_SOURCE)
    worker = load_module("racefuzz.worker.main", WORKER_SOURCE)
    worker.no_core_dumps()
    job = json.loads(job)
    job.update(schedule=SCHEDULE, profiles=PROFILES)
    import faulthandler

    faulthandler.enable(file=sys.stderr, all_threads=True)
    worker.run_job(job, worker.Channel(worker.protocol_stream()))
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: the worker's own teardown step already ran


def replay(job, env, step_timeout):
    """Run the schedule once in a child: (events, returncode, hung, stderr text)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env,
        )
        events = queue.Queue()

        def pump():
            for raw in proc.stdout:
                try:
                    events.put(json.loads(raw))
                except ValueError:
                    pass  # a torn last line from a dying child
            events.put(None)

        threading.Thread(target=pump, daemon=True).start()
        seen, hung, last = [], False, time.monotonic()
        while not hung:
            try:
                event = events.get(timeout=0.25)
            except queue.Empty:
                hung = time.monotonic() - last > step_timeout + GRACE_S
                continue
            if event is None:
                break
            seen.append(event)
            last = time.monotonic()
        if hung:
            proc.kill()
        returncode = proc.wait()
        err.seek(0)
        return seen, returncode, hung, err.read().decode("utf-8", "replace")


def child_env(environ):
    """The child's environment: the target's variables, except where the caller set them."""
    here = os.path.dirname(os.path.abspath(__file__))  # where a sanitizer's files are
    env = {**{k: v.replace("@REPRO_DIR@", here) for k, v in TARGET_ENV.items()}, **environ}
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def how_it_died(returncode):
    if returncode < 0 and -returncode in signal.valid_signals():
        return signal.Signals(-returncode).name
    return f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"


@@VERDICT@@


def parse_libraries(args):
    named = {}
    for item in args.named:
        name, eq, path = item.partition("=")
        if not eq or name not in LIBRARIES:
            known = ", ".join(LIBRARIES) or "none"
            raise Usage(f"--library wants NAME=PATH with NAME one of: {known}")
        named[name] = path
    if args.paths:
        if not LIBRARIES:
            raise Usage("this schedule registers no EP library: give no library path")
        if len(LIBRARIES) > 1 or len(args.paths) > 1:
            raise Usage(f"give each EP library as --library NAME=PATH ({', '.join(LIBRARIES)})")
        named[LIBRARIES[0]] = args.paths[0]
    for name in LIBRARIES:
        if name not in named:
            raise Usage(f"missing the path to EP library '{name}' (usage: repro.py@@USAGE@@)")
        if not os.path.isfile(named[name]):
            raise Usage(f"EP library '{named[name]}' not found")
    return {name: os.path.abspath(path) for name, path in named.items()}


def build_env_api(tmp):
    """racefuzz's C API helper for `share` steps, compiled here; None without a C compiler."""
    if not ENVAPI_C:
        return None
    source, built = os.path.join(tmp, "envapi.c"), os.path.join(tmp, "libracefuzz_envapi.so")
    with open(source, "w", encoding="utf-8") as f:
        f.write(ENVAPI_C)
    cmd = [os.environ.get("CC") or "cc", "-shared", "-fPIC", "-o", built, source]
    with contextlib.suppress(OSError):
        return built if subprocess.run(cmd, capture_output=True).returncode == 0 else None


def main(argv):
    parser = Parser(prog="repro.py", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH_TO_EP_LIBRARY")
    parser.add_argument("--library", dest="named", action="append", default=[],
                        metavar="NAME=PATH", help="one EP library, by the name steps use")
    parser.add_argument("--times", type=int, default=@@TIMES@@, help="replays (default @@TIMES@@)")
    parser.add_argument("--step-timeout", type=float, default=STEP_TIMEOUT, metavar="S")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the random inputs")
    parser.add_argument("--parallel", type=int, default=1, metavar="N",
                        help="replays at once (a GPU race may need the load a campaign had)")
    parser.add_argument("--child", metavar="JOB", help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
        if args.child is not None:
            child(args.child)
        if args.times < 1 or args.parallel < 1 or args.step_timeout <= 0:
            raise Usage("--times and --parallel must be at least 1, --step-timeout positive")
        libraries = parse_libraries(args)
    except Usage as e:
        print(f"repro.py: error: {e}", file=sys.stderr)
        return 2
    normalise = load_module("racefuzz_normalise", NORMALISE_SOURCE).normalise
    sanitizer = load_module("racefuzz_sanitizer_report", SANITIZER_REPORT_SOURCE)
    files = [os.path.basename(path) for path in libraries.values()]
    env = child_env(os.environ)
    print(f"racefuzz repro: {FINDING['kind']} in {FINDING['op']}: {FINDING['message']}")
    print(TIMELINE)
    hits = 0
    with tempfile.TemporaryDirectory(prefix="racefuzz-repro-") as tmp:
        models = {}
        for k, (name, data) in enumerate(sorted(MODELS.items())):
            models[name] = os.path.join(tmp, f"model{k}.onnx")
            with open(models[name], "wb") as f:
                f.write(base64.b64decode(data))
        job = {"libraries": libraries, "models": models, "seed": args.seed,
               "step_timeout": args.step_timeout, "tolerance": TOLERANCE,
               "env_api": build_env_api(tmp)}
        shown, done = False, {}

        def one(n):  # one replay in its own process, with its own trace file
            run_env, trace = dict(env), None
            if TRACE and "RACEFUZZ_TESTBED_TRACE" not in os.environ:
                trace = run_env["RACEFUZZ_TESTBED_TRACE"] = os.path.join(tmp, f"trace{n}.jsonl")
            done[n] = (trace, *replay(job, run_env, args.step_timeout))

        for n in range(1, args.times + 1):
            if n not in done:  # the next batch of --parallel replays, all at once
                batch = [threading.Thread(target=one, args=(k,))
                         for k in range(n, min(n + args.parallel, args.times + 1))]
                for t in batch:
                    t.start()
                for t in batch:
                    t.join()
            trace, events, returncode, hung, stderr = done.pop(n)
            if not any(e.get("ev") == "ready" for e in events) and not hung:
                tail = (stderr.strip().splitlines() or ["no output"])[-1]
                print(f"repro.py: error: the replay process failed to start: {tail}",
                      file=sys.stderr)
                return 2
            reports = [(sanitizer.kind(r), sanitizer.summary(r, files))
                       for r in sanitizer.extract(stderr)]
            ok, what = verdict(events, returncode, hung, trace, normalise, reports)
            hits += ok
            print(f"replay {n}/{args.times}: {'REPRODUCED' if ok else 'not reproduced'}: {what}")
            if (hung or returncode != 0) and not shown and stderr.strip():
                shown = True
                print("  stderr (last 40 lines):")
                print("\n".join("    " + x for x in stderr.strip().splitlines()[-40:]))
    print(f"reproduced {hits}/{args.times}")
    return 1 if hits else 0


# --- the finding and what replays it (generated by racefuzz @@VERSION@@) ---------------------

FINDING = json.loads(@@FINDING@@)
TIMELINE = @@TIMELINE@@
SCHEDULE = json.loads(@@SCHEDULE@@)
RACE_KINDS = json.loads(@@RACE_KINDS@@)  # each op's kind of call in an overlap's shape
PROFILES = json.loads(@@PROFILES@@)
LIBRARIES = @@LIBRARIES@@  # the EP libraries the schedule registers, by the name its steps use
TARGET_ENV = json.loads(@@ENV@@)
TRACE = @@TRACE@@  # the testbed's white-box trace (for `misroute` findings)
STEP_TIMEOUT = @@STEP_TIMEOUT@@
SEED = @@SEED@@
TOLERANCE = @@TOLERANCE@@  # (rtol, atol) against ORT's CPU EP; None: the defaults
WORKER_BUG_EXIT = @@WORKER_BUG_EXIT@@  # the worker's code for "racefuzz itself failed"
MODELS = {  # ONNX models, base64
@@MODELS@@
}

# racefuzz/judge/oracles.py: normalise
NORMALISE_SOURCE = @@NORMALISE@@

# racefuzz/judge/sanitizer_report.py
SANITIZER_REPORT_SOURCE = @@SANITIZER_REPORT@@

# racefuzz/worker/sequencer.py
SEQUENCER_SOURCE = @@SEQUENCER@@

# racefuzz/worker/handoff.py, racefuzz/worker/runs.py, racefuzz/worker/ops.py
HANDOFF_SOURCE = @@HANDOFF@@
RUNS_SOURCE = @@RUNS@@
OPS_SOURCE = @@OPS@@

# racefuzz/worker/env_api.py, and racefuzz/native/envapi.c where the schedule has `share` steps
ENV_API_SOURCE = @@ENV_API@@
ENVAPI_C = @@ENVAPI_C@@

# racefuzz/worker/lifeline.py
LIFELINE_SOURCE = @@LIFELINE@@

# racefuzz/worker/native_trace.py (inert here: repro.py does not build the crash tracer)
NATIVE_TRACE_SOURCE = @@NATIVE_TRACE@@

# racefuzz/worker/main.py
WORKER_SOURCE = @@WORKER@@

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def repro_source(
    schedule: Schedule,
    finding: Finding,
    target: Target,
    models: Mapping[str, bytes],
    *,
    seed: int = 0,
    step_timeout: float = 20.0,
    version: str = "",
) -> str:
    """The text of `repro.py` for `finding` seen on `schedule` against `target`.

    `models` maps each model name the schedule uses to its ONNX bytes; `seed` is the seed of
    the random inputs of the failing run (racefuzz's default is 0).
    """
    missing = sorted(schedule.models() - set(models))
    if missing:
        raise ValueError(f"repro_source needs the bytes of model '{missing[0]}'")
    libraries = libraries_registered(schedule, target)
    profiles = {name: target.profile(name).to_json() for name in sorted(schedule.profiles())}
    encoded = [
        f"    {name!r}: {literal(base64.encodebytes(models[name]).decode('ascii'))},"
        for name in sorted(schedule.models())
    ]
    title = f"{finding.kind} in {finding.op}: {finding.message}"  # it lands in a docstring
    fills: dict[str, Any] = {
        "TITLE": title.replace("\\", "\\\\").replace('"""', "'''"),
        "USAGE": usage(libraries),
        "VERSION": version,
        "TIMES": DEFAULT_TIMES,
        "FINDING": literal(json.dumps({k: getattr(finding, k) for k in _FINDING}, indent=1)),
        "TIMELINE": literal(text_timeline(schedule, finding.step)),
        "SCHEDULE": literal(json.dumps(to_json_obj(schedule), indent=1)),
        "RACE_KINDS": literal(json.dumps({op.value: SPECS[op].race_kind for op in Op})),
        "PROFILES": literal(json.dumps(profiles, indent=1)),
        "LIBRARIES": repr(libraries),
        "ENV": literal(json.dumps(repro_env(target), indent=1)),
        "TRACE": repr(target.trace),
        "WORKER_BUG_EXIT": repr(WORKER_BUG_EXIT),
        "STEP_TIMEOUT": repr(float(step_timeout)),
        "SEED": repr(seed),
        "TOLERANCE": repr(list(target.tolerance) if target.tolerance else None),
        "MODELS": "\n".join(encoded),
        "NORMALISE": literal(normalise_source()),
        **embedded_sources(native=Op.SHARE in schedule.ops()),
        "VERDICT": VERDICT_SOURCE,
    }
    # One pass over the markers: a filled value that happens to contain `@@X@@` stays as is.
    return re.sub(r"@@([A-Z_]+)@@", lambda m: str(fills[m.group(1)]), _TEMPLATE)
