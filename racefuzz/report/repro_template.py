"""The text of `repro.py` with `@@NAME@@` markers where `repro_script.repro_source` fills in
the finding, its schedule and the sources racefuzz embeds. Kept apart from the code that fills
it so that each stays small: this module is the script itself, as its reader will see it.
"""

# The script's logic. `@@NAME@@` markers are filled by `repro_source`; the data constants come
# last so that a reader meets the logic first. It must run on Python >= 3.10 with only
# onnxruntime and numpy installed.
TEMPLATE = r'''#!/usr/bin/env python3
"""racefuzz reproduction: @@TITLE@@

Usage: python repro.py@@USAGE@@ [--times N] [--step-timeout S] [--seed N]
(a library path may be left out where the one racefuzz ran, RECORDED below, is on this machine)

Needs Python >= 3.10, onnxruntime and numpy only. Each replay runs the schedule in a child
process, on real threads in the exact order written, with racefuzz's own sequencer and ops
(embedded below). Exit code: 1 if the finding reproduced at least once, 0 if not, 2 for bad
arguments. The target's environment (TARGET_ENV) applies only to variables the caller's
environment does not set, so `NAME= python repro.py ...` overrides one.
"""

from __future__ import annotations

import argparse, base64, contextlib, enum, json, linecache, os, queue, subprocess, sys
import tempfile, threading, time, types

if not hasattr(enum, "StrEnum"):  # Python 3.10: racefuzz's modules (3.11) import it

    class StrEnum(str, enum.Enum):
        def __str__(self):
            return str(self.value)

    enum.StrEnum = StrEnum

PACKAGES = ("racefuzz", "racefuzz.schedule", "racefuzz.targets", "racefuzz.judge",
            "racefuzz.worker")


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
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)  # as an import would: `from pkg import mod`
    return module


def load_judge():
    """racefuzz's judge, embedded below under its real module names, each after what it
    imports: every replay is judged by the code that judged the campaign's runs."""
    for package in PACKAGES:
        sys.modules.setdefault(package, types.ModuleType(package))
    for name, source in JUDGE_SOURCES.items():
        load_module(name, source)
    return types.SimpleNamespace(**{n.rsplit(".", 1)[1]: sys.modules[n] for n in JUDGE_SOURCES})


def child(job):
    """Run the schedule with racefuzz's own worker code, embedded below under its real names."""
    for package in PACKAGES:  # so the worker's own imports resolve
        sys.modules.setdefault(package, types.ModuleType(package))
    sys.modules["racefuzz.worker"].WORKER_BUG_EXIT = WORKER_BUG_EXIT
    load_module("racefuzz.worker.protocol", PROTOCOL_SOURCE)  # each after what it imports
    load_module("racefuzz.worker.base", BASE_SOURCE)
    load_module("racefuzz.worker.handoff", HANDOFF_SOURCE)
    load_module("racefuzz.worker.kept", KEPT_SOURCE)
    load_module("racefuzz.worker.runs", RUNS_SOURCE)
    load_module("racefuzz.worker.env_api", ENV_API_SOURCE)
    load_module("racefuzz.worker.holds", HOLDS_SOURCE)
    load_module("racefuzz.worker.ops", OPS_SOURCE)
    load_module("racefuzz.worker.sequencer", SEQUENCER_SOURCE)
    load_module("racefuzz.worker.lifeline", LIFELINE_SOURCE)
    load_module("racefuzz.worker.native_trace", NATIVE_TRACE_SOURCE)
    worker = load_module("racefuzz.worker.main", WORKER_SOURCE)
    worker.no_core_dumps()
    job = json.loads(job)
    job.setdefault("schedule", SCHEDULE)  # a step alone has its own (`race_symptoms`)
    job["profiles"] = PROFILES
    import faulthandler

    faulthandler.enable(file=sys.stderr, all_threads=True)
    worker.run_job(job, worker.Channel(worker.protocol_stream()))
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: the worker's own teardown step already ran


def rss_mb(pid):
    """The child's resident memory in MiB, where /proc tells it (Linux), else None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def replay(judge, job, env, step_timeout):
    """Run the job's schedule (the finding's, unless it names one) once in a child, watched as
    racefuzz's executor watches a worker (the same `ending.Watch`): (watch, returncode, whether
    it started, stderr text)."""
    schedule = judge.json_io.from_json_obj(job.get("schedule", SCHEDULE), library_of=library_of)
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
        watch = judge.ending.Watch(
            schedule, step_timeout, SCHEDULE_TIMEOUT, MAX_RSS_MB, time.monotonic()
        )
        ready = False
        while True:
            try:
                event = events.get(timeout=0.25)
            except queue.Empty:
                event = {}  # none for a while: time to check the limits
            if event is None:
                break
            if event:
                ready = ready or event.get("ev") == "ready"
                watch.event(event, time.monotonic())
            if not event or event.get("ev") == "done":
                if watch.limit(time.monotonic(), rss_mb(proc.pid)) is not None:
                    proc.kill()
                    break
        try:
            returncode = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = proc.wait()
        err.seek(0)
        return watch, returncode, ready, err.read().decode("utf-8", "replace")


def child_env(environ):
    """The child's environment: the target's variables, except where the caller set them."""
    here = os.path.dirname(os.path.abspath(__file__))  # where a sanitizer's files are
    env = {**{k: v.replace("@REPRO_DIR@", here) for k, v in TARGET_ENV.items()}, **environ}
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def read_trace(path):
    """The trace lines of one replay (the testbed's, the layer's), where they were written."""
    if not path or not os.path.exists(path):
        return ()
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = []
        for line in f:
            with contextlib.suppress(ValueError):
                lines.append(json.loads(line))
        return tuple(lines)


def library_of(profile):
    return PROFILES[profile]["library"]


def judged(judge, watch, returncode, stderr, trace, files):
    """The run as racefuzz's executor tells it, judged by racefuzz's oracles."""
    result = watch.result(returncode, time.monotonic())
    result = judge.ending.with_output(result, stderr, judge.ending.stack_part(stderr), trace)
    return judge.oracles.judge(result, library_of, files, BY_OVERLAP)


def verdict(race, judged):
    """(reproduced, what this replay did), counted by the rule racefuzz's shrinker counts replays
    by (`race_symptoms.RaceSymptoms`, which replays a race's other symptom's step alone)."""
    hit = race.evidence(judged.schedule, judged.findings)
    if hit is not None:
        other = " (another symptom of the race: its step is clean alone)"
        return True, describe(judged, hit) + (other if race.is_other(hit) else "")
    if judged.exit == "killed":
        return False, f"killed from outside ({judged.signal}): the run tells nothing of the EP"
    if judged.findings:
        return False, "something else: " + "; ".join(describe(judged, f) for f in judged.findings)
    return False, f"clean: all {len(SCHEDULE['steps'])} steps ok"


def describe(result, finding):
    """One line for a judged finding of a replay."""
    steps = SCHEDULE["steps"]

    def op_of(i):  # index len(steps) is racefuzz's teardown step
        return steps[i]["op"] if i < len(steps) else "teardown"

    flying = ", ".join(f"step {i} ({op_of(i)})" for i in result.in_flight) or "no step"
    if finding.kind in ("crash", "hang", "leak"):
        what = f"crash ({finding.message})" if finding.kind == "crash" else finding.kind
        text = f"{what} with {flying} in flight"
    elif finding.kind in ("asan", "tsan"):
        text = f"{finding.kind}: {finding.message}"
    elif finding.step is not None:
        text = f"{finding.kind} at step {finding.step} ({finding.op}): {finding.raw}"
    else:
        text = f"{finding.kind}: {finding.raw}"
    return text + (f" (after the {finding.overlap} overlap)" if finding.overlap else "")


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
    if args.no_layer and not BEHIND:
        raise Usage("--no-layer: this bundle did not run behind racefuzz's EP-ABI layer")
    for name in LIBRARIES:
        if name not in named and args.no_layer:
            named[name] = BEHIND[name]  # what the layer stood in front of
        if name not in named and os.path.isfile(RECORDED[name]):
            named[name] = RECORDED[name]  # the library racefuzz ran, still where it was
        if name not in named:
            raise Usage(f"missing the path to EP library '{name}', and '{RECORDED[name]}' is "
                        "not here (usage: repro.py@@USAGE@@)")
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
    parser.add_argument("paths", nargs="*", metavar="PATH_TO_EP_LIBRARY",
                        help="the EP library to replay against, one per library the schedule "
                        "registers (default: the one racefuzz ran, where it still is)")
    parser.add_argument("--library", dest="named", action="append", default=[],
                        metavar="NAME=PATH", help="one EP library, by the name steps use")
    parser.add_argument("--times", type=int, default=@@TIMES@@, help="replays (default @@TIMES@@)")
    parser.add_argument("--step-timeout", type=float, default=STEP_TIMEOUT, metavar="S",
                        help="seconds a step may take before the replay counts as a hang "
                        "(default: the campaign's, %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the random inputs")
    parser.add_argument("--parallel", type=int, default=1, metavar="N",
                        help="replays at once (a GPU race may need the load a campaign had)")
    parser.add_argument("--no-layer", action="store_true",
                        help="replay the libraries racefuzz's EP-ABI layer stood in front of, "
                        "without it (no abi checks)")
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
    judge = load_judge()
    files = [os.path.basename(path) for path in libraries.values()]

    def run_alone(schedule):  # one step alone, for a race's other symptoms
        obj = judge.json_io.to_json_obj(schedule)
        watch, returncode, _, stderr = replay(judge, {**job, "schedule": obj}, env,
                                              args.step_timeout)
        return judged(judge, watch, returncode, stderr, (), files).findings

    race = judge.race_symptoms.RaceSymptoms(FINDING["cluster"], FINDING["symptom"], run_alone)
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
            names = [name for name in TRACE if name not in os.environ
                     and not (args.no_layer and name == "RACEFUZZ_LAYER_REPORT")]
            if names:
                trace = os.path.join(tmp, f"trace{n}.jsonl")
                run_env.update(dict.fromkeys(names, trace))
            done[n] = (trace, *replay(judge, job, run_env, args.step_timeout))

        for n in range(1, args.times + 1):
            if n not in done:  # the next batch of --parallel replays, all at once
                batch = [threading.Thread(target=one, args=(k,))
                         for k in range(n, min(n + args.parallel, args.times + 1))]
                for t in batch:
                    t.start()
                for t in batch:
                    t.join()
            trace, watch, returncode, ready, stderr = done.pop(n)
            if not ready and watch.killed_for is None:
                tail = (stderr.strip().splitlines() or ["no output"])[-1]
                print(f"repro.py: error: the replay process failed to start: {tail}",
                      file=sys.stderr)
                return 2
            if watch.internal:
                last = (watch.internal.strip().splitlines() or ["?"])[-1]
                ok, what = False, f"racefuzz's own worker code failed, not the EP: {last}"
            else:
                ok, what = verdict(race, judged(judge, watch, returncode, stderr,
                                                read_trace(trace), files))
            hits += ok
            print(f"replay {n}/{args.times}: {'REPRODUCED' if ok else 'not reproduced'}: {what}")
            if (watch.killed_for or returncode != 0) and not shown and stderr.strip():
                shown = True
                print("  stderr (last 40 lines):")
                print("\n".join("    " + x for x in stderr.strip().splitlines()[-40:]))
    print(f"reproduced {hits}/{args.times}")
    return 1 if hits else 0


# --- the finding and what replays it (generated by racefuzz @@VERSION@@) ---------------------

FINDING = json.loads(@@FINDING@@)
TIMELINE = @@TIMELINE@@
SCHEDULE = json.loads(@@SCHEDULE@@)
PROFILES = json.loads(@@PROFILES@@)
# The EP libraries the schedule registers, by the name its steps use, and where racefuzz
# found each: the default path.
RECORDED = @@RECORDED@@
BEHIND = @@BEHIND@@  # behind racefuzz's EP-ABI layer: the library it stood in front of
LIBRARIES = list(RECORDED)
TARGET_ENV = json.loads(@@ENV@@)
# The variables that name a replay's trace file: the testbed's white-box trace (`misroute`
# findings), racefuzz's EP-ABI layer's report (`abi` findings).
TRACE = @@TRACE@@
BY_OVERLAP = @@BY_OVERLAP@@  # the target clusters by overlap shape (`cluster_by = "overlap"`)
STEP_TIMEOUT = @@STEP_TIMEOUT@@
SCHEDULE_TIMEOUT = @@SCHEDULE_TIMEOUT@@
MAX_RSS_MB = @@MAX_RSS_MB@@  # a child past this much memory is killed: a leak
SEED = @@SEED@@
TOLERANCE = @@TOLERANCE@@  # (rtol, atol) against ORT's CPU EP; None: the defaults
WORKER_BUG_EXIT = @@WORKER_BUG_EXIT@@  # the worker's code for "racefuzz itself failed"
MODELS = {  # ONNX models, base64
@@MODELS@@
}

# racefuzz's judge: module name -> source, in import order
JUDGE_SOURCES = {
@@JUDGE@@
}

# racefuzz/worker/sequencer.py
SEQUENCER_SOURCE = @@SEQUENCER@@

# racefuzz/worker/protocol.py, base.py, handoff.py, kept.py, runs.py, holds.py, ops.py
PROTOCOL_SOURCE = @@PROTOCOL@@
BASE_SOURCE = @@BASE@@
HANDOFF_SOURCE = @@HANDOFF@@
KEPT_SOURCE = @@KEPT@@
RUNS_SOURCE = @@RUNS@@
HOLDS_SOURCE = @@HOLDS@@
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
