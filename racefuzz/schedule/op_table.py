"""The op table: the one place that says what each schedule op is.

Every stage that must know something about an op (well-formedness, generation, mutation,
shrinking, baselines, ORT's contract, `describe`, `doctor`, JSON) reads it from `SPECS` instead of
naming ops. Adding an op is one `Op` member and one `OpSpec` here, plus its `Runtime.op_<name>`
handler in `racefuzz/worker/ops.py`; nothing else changes (tests/test_op_table.py applies such a
diff to a copy of the package and fuzzes with it).

An op's *subject* is what its main name field names, and its *effect* on it:

- a library (`library`, None meaning every library): `register` makes its registration,
  `unregister` ends it;
- a session (`session`) or a device value (`value`): made (a fresh name), used (alive), or ended
  (alive before, gone after);
- a profile (`profile`): used directly, e.g. env-level memory of that profile's device.

`peer` is a second session or value an op uses (alive, not made in its overlap group, under
ORT's contract like the subject); `mode` picks a variant of an op from the modes its entry lists.

What follows from subject and effect (so entries need not say it):

- `enabled_steps` proposes a library op once per registration key; a maker once per profile
  (and model, if it takes one) under a fresh name; a user or ender once per live subject or per
  profile; each of those once per live peer and once per allowed mode (None first).
- `alone.alone_schedule` replays a step alone as `register`, `create s1` (unless the subject
  is a library), the subject's and the peer's makers under fresh names, then the step itself.
- `Step.describe` prints `op name (profile, model) -> peer [mode]`, with what the op takes.

The backbone (`register`, `unregister`, `create`) keeps a few explicit cases elsewhere: the
library lifecycle, and `create` as the call that chooses a backend (`needs_earlier_create`).
This module knows nothing of steps or schedules; it is data and a few lookups.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from racefuzz.schedule.op_spec import (
    LIVE_KINDS,
    NAME_FIELDS,
    PREFIX,
    Effect,
    OpSpec,
    Subject,
    check_specs,
)

# Re-exported: most stages read an op's entry and its vocabulary from here.
__all__ = [
    "C_API_OPS",
    "HOLD_POINTS",
    "LAYER_OPS",
    "LIVE_KINDS",
    "NAME_FIELDS",
    "PREFIX",
    "REQUIRED_OPS",
    "SPECS",
    "Effect",
    "Op",
    "OpSpec",
    "Subject",
    "check_table",
    "maker",
    "spec",
]


class Op(StrEnum):
    """The calls a step can make (all through the public onnxruntime Python API).

    The order is the table's order: proposals, error messages and `SPECS` follow it.
    """

    REGISTER = "register"
    UNREGISTER = "unregister"
    CREATE = "create"
    RUN = "run"
    RUN_BOUND = "run_bound"
    COPY = "copy"
    ALLOC = "alloc"
    READ = "read"
    FREE = "free"
    RELEASE = "release"
    FEED = "feed"
    RUN_ASYNC = "run_async"
    TERMINATE = "terminate"
    SHARE = "share"
    HOLD = "hold"
    RESUME = "resume"
    KEEP = "keep"
    BIND = "bind"
    UPLOAD = "upload"
    HARD_RELEASE = "hard_release"


# The layer's scheduling points (racefuzz/layer/holds.h), as a `hold` step's mode names them.
HOLD_POINTS = ("run-start", "compute", "compute-end", "copy", "run-end")

_LIB, _SES, _VAL, _PRO = Subject.LIBRARY, Subject.SESSION, Subject.VALUE, Subject.PROFILE
_MAKES, _USES, _ENDS = Effect.MAKES, Effect.USES, Effect.ENDS
_ANY_LIBRARY = frozenset({"library"})

# Weights: creates and runs dominate because every seeded bug needs sessions of two profiles and
# runs after them.
SPECS: Mapping[Op, OpSpec[Op]] = {
    s.op: s
    for s in (
        OpSpec(
            Op.REGISTER,
            "register_execution_provider_library (one library, or all of them)",
            _LIB,
            _MAKES,
            ("library",),
            optional=_ANY_LIBRARY,
            weight=2.0,
            essential=True,
        ),
        OpSpec(
            Op.UNREGISTER,
            "unregister_execution_provider_library (one library, or all of them)",
            _LIB,
            _ENDS,
            ("library",),
            optional=_ANY_LIBRARY,
            weight=0.3,
        ),
        OpSpec(
            Op.CREATE,
            "InferenceSession for a profile and a model",
            _SES,
            _MAKES,
            ("session", "profile", "model"),
            needs_registration=True,
            weight=3.0,
            essential=True,
            doctor=True,
        ),
        OpSpec(
            Op.RUN,
            "session.run on fresh random inputs, checked against the CPU reference",
            _SES,
            _USES,
            ("session",),
            weight=3.0,
            essential=True,
            doctor=True,
            sized=True,
        ),
        # Modes: host_in binds a host input (bind_cpu_input: the upload happens at bind time, on
        # the session's stream) and lets ORT allocate the outputs on the device; host_out binds
        # device inputs and host outputs; sync adds synchronize_inputs/outputs (OrtEp::Sync)
        # around the run, host_in_sync both.
        OpSpec(
            Op.RUN_BOUND,
            "run through IOBinding, inputs and outputs in device memory (or host, by mode)",
            _SES,
            _USES,
            ("session",),
            modes=("host_in", "host_in_sync", "host_out", "sync"),
            mode_weights={"host_in": 0.5, "host_in_sync": 0.25, "host_out": 0.25, "sync": 0.25},
            needs_registration=True,
            weight=1.5,
            doctor=True,
            race_as="run",
            sized=True,
        ),
        # Modes: stream uploads on a stream from the EP device's create_sync_stream() and reads
        # back on the same stream (ordered only by it); stream_unordered reads back without one.
        OpSpec(
            Op.COPY,
            "env-level copy_tensors host -> device -> host (on a sync stream, by mode), checked"
            " byte for byte",
            _PRO,
            _USES,
            ("profile",),
            modes=("stream", "stream_unordered"),
            mode_weights={"stream": 0.5, "stream_unordered": 0.25},
            needs_registration=True,
            needs_earlier_create=True,
            weight=1.4,
            doctor=True,
        ),
        OpSpec(
            Op.ALLOC,
            "allocate a device value, upload random data, keep it alive",
            _VAL,
            _MAKES,
            ("value", "profile"),
            needs_registration=True,
            needs_earlier_create=True,
            weight=1.2,
            race_as="copy",
        ),
        OpSpec(
            Op.READ,
            "copy a kept device value back to host and compare with what was uploaded",
            _VAL,
            _USES,
            ("value",),
            needs_registration=True,
            weight=1.5,
            race_as="copy",
        ),
        OpSpec(
            Op.FREE,
            "drop a kept device value",
            _VAL,
            _ENDS,
            ("value",),
            weight=0.4,
            race_as="release",
        ),
        OpSpec(Op.RELEASE, "drop a session and collect it", _SES, _ENDS, ("session",), weight=0.9),
        OpSpec(
            Op.FEED,
            "run through IOBinding to device outputs, feed them to the peer session's run",
            _SES,
            _USES,
            ("session",),
            peer=_SES,
            needs_registration=True,
            weight=0.6,
            race_as="run",
            sized=True,
        ),
        # Completes on an ORT intra-op pool thread; a profile whose pool has no thread for it
        # (intra_op_threads=1) gets a skipped step, not a finding (racefuzz/worker/runs.py). Not
        # in doctor's table: `run` already says whether the profile computes.
        OpSpec(
            Op.RUN_ASYNC,
            "session.run_async, waited for, checked against the CPU reference",
            _SES,
            _USES,
            ("session",),
            weight=1.0,
            on_ort_thread=True,
            race_as="run",
            sized=True,
        ),
        # Sets RunOptions.terminate on the session's runs in flight, or arms its next run; a run
        # so stopped is no finding, but what the session computes afterwards is checked.
        OpSpec(
            Op.TERMINATE,
            "RunOptions.terminate on the session's runs in flight (none: on its next run)",
            _SES,
            _USES,
            ("session",),
            weight=0.5,
            beside=frozenset({Op.RUN, Op.RUN_ASYNC}),
        ),
        # Through ORT's C API (racefuzz/worker/env_api.py): Python has no CreateSharedAllocator.
        # Skipped for an EP that computes in host memory, or without a C compiler.
        OpSpec(
            Op.SHARE,
            "CreateSharedAllocator: a new environment allocator for the profile's device memory",
            _PRO,
            _USES,
            ("profile",),
            needs_registration=True,
            weight=0.5,
            doctor=True,
        ),
        # Scheduling points of the EP-ABI layer (racefuzz/worker/holds.py): only a layered
        # target offers them (`strategies.space`); elsewhere a hold is a skipped step.
        OpSpec(
            Op.HOLD,
            "arm a point of the layer: the session's next thread to reach it parks there",
            _SES,
            _USES,
            ("session",),
            modes=HOLD_POINTS,
            mode_required=True,
            mode_weights={"compute": 2.0, "run-start": 2.0},
            weight=0.8,
        ),
        OpSpec(
            Op.RESUME,
            "release the session's parked threads and wait for their steps",
            _SES,
            _USES,
            ("session",),
            weight=0.6,
        ),
        # Kept values sessions read and write in place (racefuzz/worker/kept.py): a session's
        # device output kept past its run (and past the session), a kept value bound as an
        # input with the binding kept for the next run (fixed buffers), data written into one.
        OpSpec(
            Op.KEEP,
            "run the peer session through IOBinding, keep its first device output as a value",
            _VAL,
            _MAKES,
            ("value",),
            peer=_SES,
            needs_registration=True,
            weight=0.5,
            race_as="run",
            sized=True,
        ),
        OpSpec(
            Op.BIND,
            "run with the peer value's own memory bound as the first input; the binding is kept"
            " and `again` runs it as it is",
            _SES,
            _USES,
            ("session",),
            peer=_VAL,
            modes=("again",),
            mode_weights={"again": 0.7},
            needs_registration=True,
            weight=1.2,
            race_as="run",
            sized=True,
        ),
        # Plain: copy_tensors without a stream, documented as complete on return; `stream`: on a
        # sync stream of the value's device that nobody waits for (what ORT leaves to the caller).
        OpSpec(
            Op.UPLOAD,
            "copy new random data into a kept device value (on a sync stream, by mode)",
            _VAL,
            _USES,
            ("value",),
            modes=("stream",),
            mode_weights={"stream": 0.3},
            needs_registration=True,
            weight=1.0,
            race_as="copy",
        ),
        # ReleaseSession through the C API, as a C or C++ application releases a session: now,
        # whatever Python still holds (kept values and bindings keep a Python session alive).
        OpSpec(
            Op.HARD_RELEASE,
            "release a session through the C API now, while values it made stay alive",
            _SES,
            _ENDS,
            ("session",),
            weight=0.6,
            race_as="release",
        ),
    )
}

# Ops made through ORT's C API by racefuzz's native helper (racefuzz/native/envapi.c).
C_API_OPS = frozenset({Op.SHARE, Op.HARD_RELEASE})

# Ops only a target with the EP-ABI layer offers.
LAYER_OPS = frozenset({Op.HOLD, Op.RESUME})

# Ops every space must offer: a schedule opens with a `register`, and nothing runs without a
# session (see `strategies.space`).
REQUIRED_OPS = frozenset({Op.REGISTER, Op.CREATE})


def spec(op: Op) -> OpSpec[Op]:
    return SPECS[op]


def maker(kind: Subject) -> OpSpec[Op]:
    """The op that makes a `kind` (the first in table order): what an error message names, and
    what a baseline calls to make one."""
    return next(s for s in SPECS.values() if s.makes(kind))


def check_table(specs: Mapping[Op, OpSpec[Op]]) -> list[str]:
    """Every inconsistency of a table, one line each; [] for a good one (ours is checked at
    import, so a bad entry fails at once rather than deep in a campaign)."""
    return check_specs(specs, Op)


_PROBLEMS = check_table(SPECS)
assert not _PROBLEMS, _PROBLEMS[0]
