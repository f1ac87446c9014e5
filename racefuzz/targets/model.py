"""What racefuzz fuzzes: EP libraries, the profiles that pick an EP device, and models.

A `Target` names the EP libraries to register, the profiles a schedule's `create` and `copy`
steps may use (profile = EP name + device filter + provider options + session settings), the
models to run, environment variables the worker sets before loading anything, and aliases.
Aliases let the named scenario schedules, written with the seed's profile names `dml` and
`mgx`, apply to any target: a target maps those names onto two of its own profiles.

Targets come from a built-in name (`testbed`, `testbed:B3,B4`, `testbed[tsan]`, `nxrt-cpu`,
`cpu`; see `builtin_targets`) or from a `[targets.NAME]` table of a TOML config (`racefuzz.toml`
in the current folder unless one is given; `examples/racefuzz.toml` shows every key), read by
`target_config`.

A target crosses into worker processes as JSON (`to_json`/`from_json`). This module does not
import onnxruntime: registering libraries and creating sessions is the worker's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.model import Schedule
from racefuzz.targets import sanitizer

BUILTIN_TARGETS: tuple[str, ...] = (
    "testbed",
    "nxrt-cpu",
    "cpu",
    "webgpu",
    "nxrt-cuda",
    "cuda",
    "tensorrt",
    "webgpu-cpu",
    "openvino",
    "ggml",
)
DEVICE_TYPES: tuple[str, ...] = ("cpu", "gpu", "npu")
# Profile.thread_pools: the session's own intra/inter-op pools, or the process's global ones.
THREAD_POOLS: tuple[str, ...] = ("session", "global")
# Profile.execution_mode: ORT's ExecutionMode (parallel runs kernels on inter-op threads).
EXECUTION_MODES: tuple[str, ...] = ("sequential", "parallel")
DEFAULT_CONFIG = "racefuzz.toml"


class FrozenMap(Mapping[str, str]):
    """An immutable, hashable str -> str mapping, so targets and profiles can be dict keys."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"


def _freeze(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, FrozenMap):
            object.__setattr__(obj, name, FrozenMap(value))


@dataclass(frozen=True)
class Library:
    """An EP library: `name` is what schedules' `register`/`unregister` steps say."""

    name: str
    path: Path  # absolute
    sanitizer: str | None = None  # "address" | "thread": built with -fsanitize=<this>
    # The real EP library when `path` is racefuzz's forwarding library (`targets.forwarding`).
    forwards_to: Path | None = None
    # The module whose `get_library_path()` gave `path` (a `{package = ...}` library): where the
    # path differs, e.g. on another node of a Ray fleet, the package says it again.
    package: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.sanitizer is not None:
            sanitizer.check_name(self.sanitizer)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "path": str(self.path)}
        if self.forwards_to is not None:
            d["forwards_to"] = str(self.forwards_to)
        return d | ({"sanitizer": self.sanitizer} if self.sanitizer else {})


@dataclass(frozen=True)
class Profile:
    """How a session (or an env-level copy) picks its EP device and configures it."""

    name: str
    library: str | None  # None: an EP built into onnxruntime, e.g. CPUExecutionProvider
    ep_name: str  # `OrtEpDevice.ep_name` to select in `onnxruntime.get_ep_devices()`
    provider_options: Mapping[str, str]
    device_type: str | None = None  # one of DEVICE_TYPES; None: any device of the EP
    vendor_id: int | None = None  # hardware vendor of the device; None: any
    intra_op_threads: int | None = None  # SessionOptions.intra_op_num_threads; None: ORT's
    session_config: Mapping[str, str] = FrozenMap()  # SessionOptions.add_session_config_entry
    device_index: int | None = None  # `OrtEpDevice.device.device_id` to pin to; None: any
    thread_pools: str = "session"  # one of THREAD_POOLS
    execution_mode: str = "sequential"  # one of EXECUTION_MODES
    inter_op_threads: int | None = None  # SessionOptions.inter_op_num_threads; None: ORT's

    def __post_init__(self) -> None:
        _freeze(self, "provider_options", "session_config")

    def matches(self, ep_device: Any) -> bool:
        """Whether an `onnxruntime.OrtEpDevice` is one this profile's sessions should use."""
        device = ep_device.device
        return (
            ep_device.ep_name == self.ep_name
            and (self.device_type is None or device.type.name.lower() == self.device_type)
            and (self.vendor_id is None or device.vendor_id == self.vendor_id)
            and (self.device_index is None or device.device_id == self.device_index)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "library": self.library,
            "ep_name": self.ep_name,
            "provider_options": dict(self.provider_options),
            "device_type": self.device_type,
            "vendor_id": self.vendor_id,
            "intra_op_threads": self.intra_op_threads,
            "session_config": dict(self.session_config),
        } | self._threading_json()

    def _threading_json(self) -> dict[str, Any]:
        # Only what differs from ORT's defaults, so that older profiles' JSON stays as it was.
        out: dict[str, Any] = {}
        if self.device_index is not None:
            out["device_index"] = self.device_index
        if self.thread_pools != "session":
            out["thread_pools"] = self.thread_pools
        if self.execution_mode != "sequential":
            out["execution_mode"] = self.execution_mode
        if self.inter_op_threads is not None:
            out["inter_op_threads"] = self.inter_op_threads
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Profile:
        return cls(**obj)


CLUSTER_BY = ("symptom", "overlap")
TRACE_ENV = "RACEFUZZ_TESTBED_TRACE"
LAYER_REPORT_ENV = "RACEFUZZ_LAYER_REPORT"


@dataclass(frozen=True)
class Target:
    name: str
    libraries: tuple[Library, ...]
    profiles: tuple[Profile, ...]
    models: tuple[str, ...]  # built-in model names or absolute paths to .onnx files
    env: Mapping[str, str] = FrozenMap()  # set in the worker before ORT loads anything
    aliases: Mapping[str, str] = FrozenMap()  # schedule profile name -> one of `profiles`
    trace: bool = False  # the worker sets a per-run RACEFUZZ_TESTBED_TRACE file
    # The EP-ABI validation layer stands in front of the libraries (`targets.layer`): the
    # worker sets a per-run RACEFUZZ_LAYER_REPORT file, read like the trace.
    layer: bool = False
    # The provider option whose value is an EP instance's backend, for the layer's ownership
    # model (the testbed's `profile`); "": every instance of one EP is one backend.
    backend_option: str = ""
    # (rtol, atol) for outputs against ORT's CPU EP; None: the worker's defaults (1e-4)
    tolerance: tuple[float, float] | None = None
    # "symptom" (kind, op, message) or "overlap": findings after an overlap group are one
    # cluster per group shape, whatever they look like (an EP whose races surface as a
    # different error, crash or wrong value each time, like webgpu's shared device).
    cluster_by: str = "symptom"
    description: str = field(default="", compare=False)
    # What racefuzz changes of what the EP sees (a forwarding library's answers), in words:
    # shown by doctor and kept in every bundle, so a reader knows the EP ran adapted.
    adaptations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, "env", "aliases")
        problems = self._problems()
        if problems:
            raise RacefuzzError(f"target '{self.name}': {problems[0]}")

    @property
    def sanitizer(self) -> str | None:
        """The sanitizer whose runtime the worker preloads for these libraries, if any."""
        return sanitizer.of_libraries(lib.sanitizer for lib in self.libraries)

    def _problems(self) -> list[str]:
        out: list[str] = []
        try:
            sanitizer.of_libraries(lib.sanitizer for lib in self.libraries)
        except RacefuzzError as e:
            out.append(str(e))
        if self.cluster_by not in CLUSTER_BY:
            choices = ", ".join(CLUSTER_BY)
            out.append(f"cluster_by must be one of {choices}, not '{self.cluster_by}'")
        libraries = {lib.name for lib in self.libraries}
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            out.append("two profiles share a name")
        for p in self.profiles:
            if p.library is not None and p.library not in libraries:
                out.append(f"profile '{p.name}' names unknown library '{p.library}'")
        for alias, to in self.aliases.items():
            if alias in names or to not in names:
                out.append(f"alias '{alias}' must map a new name onto a profile, not '{to}'")
        return out

    def trace_envs(self) -> tuple[str, ...]:
        """The variables a worker sets to its run's trace file: the testbed's white-box trace,
        the EP-ABI layer's report (both read as the run's trace lines)."""
        return (TRACE_ENV,) * self.trace + (LAYER_REPORT_ENV,) * self.layer

    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def profile(self, name: str) -> Profile:
        """The profile a schedule's name means here, through an alias if need be."""
        real = self.aliases.get(name, name)
        for p in self.profiles:
            if p.name == real:
                return p
        known = ", ".join([*self.profile_names(), *self.aliases])
        raise RacefuzzError(f"unknown profile '{name}' for target '{self.name}' (known: {known})")

    def library_of(self, profile_name: str) -> str | None:
        """The library a profile needs registered; shaped for `schedule.problems`."""
        return self.profile(profile_name).library

    def library(self, name: str) -> Library:
        for lib in self.libraries:
            if lib.name == name:
                return lib
        known = ", ".join(lib.name for lib in self.libraries) or "none"
        raise RacefuzzError(f"unknown library '{name}' for target '{self.name}' (known: {known})")

    def missing(self, schedule: Schedule) -> list[str]:
        """Why the schedule cannot run on this target (unknown profiles or libraries)."""
        known = set(self.profile_names()) | set(self.aliases)
        out = [f"profile '{p}'" for p in sorted(schedule.profiles() - known)]
        libraries = {lib.name for lib in self.libraries}
        named = {s.library for s in schedule.steps if s.library is not None}
        out += [f"library '{name}'" for name in sorted(named - libraries)]
        return out

    def applies(self, schedule: Schedule) -> bool:
        return not self.missing(schedule)

    def with_env(self, env: Mapping[str, str] | None = None, **more: str) -> Target:
        """A copy with environment variables added (later ones win)."""
        return replace(self, env=FrozenMap({**self.env, **(env or {}), **more}))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "libraries": [lib.to_json() for lib in self.libraries],
            "profiles": [p.to_json() for p in self.profiles],
            "models": list(self.models),
            "env": dict(self.env),
            "aliases": dict(self.aliases),
            "trace": self.trace,
            "tolerance": list(self.tolerance) if self.tolerance else None,
            "cluster_by": self.cluster_by,
        } | (
            ({"adaptations": list(self.adaptations)} if self.adaptations else {})
            | ({"layer": True} if self.layer else {})
            | ({"backend_option": self.backend_option} if self.backend_option else {})
        )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Target:
        return cls(
            name=obj["name"],
            description=obj.get("description", ""),
            libraries=tuple(
                Library(
                    d["name"],
                    Path(d["path"]),
                    d.get("sanitizer"),
                    Path(d["forwards_to"]) if d.get("forwards_to") else None,
                )
                for d in obj["libraries"]
            ),
            profiles=tuple(Profile.from_json(d) for d in obj["profiles"]),
            models=tuple(obj["models"]),
            env=obj.get("env", {}),
            aliases=obj.get("aliases", {}),
            trace=bool(obj.get("trace", False)),
            tolerance=tuple(obj["tolerance"]) if obj.get("tolerance") else None,
            cluster_by=obj.get("cluster_by", "symptom"),
            adaptations=tuple(obj.get("adaptations", ())),
            layer=bool(obj.get("layer", False)),
            backend_option=str(obj.get("backend_option", "")),
        )


def describe(target: Target) -> str:
    """A few lines for `racefuzz doctor`: what the target registers, selects and runs."""
    lines = [f"target {target.name}" + (f": {target.description}" if target.description else "")]
    lines += [
        f"  library {lib.name}: {lib.path}"
        + (f" (built with -fsanitize={lib.sanitizer})" if lib.sanitizer else "")
        for lib in target.libraries
    ]
    for p in target.profiles:
        where = p.device_type or "any device"
        if p.vendor_id is not None:
            where += f" of vendor {p.vendor_id:#06x}"
        extra = [f"{k}={v}" for k, v in p.provider_options.items()]
        if p.intra_op_threads is not None:
            extra.append(f"intra-op threads {p.intra_op_threads}")
        extra += [f"{k}={v}" for k, v in p.session_config.items()]
        lib = f" from {p.library}" if p.library else " (built into onnxruntime)"
        tail = f" [{', '.join(extra)}]" if extra else ""
        lines.append(f"  profile {p.name}: {p.ep_name}{lib} on {where}{tail}")
    if target.aliases:
        pairs = ", ".join(f"{a} -> {p}" for a, p in target.aliases.items())
        lines.append(f"  aliases: {pairs}")
    lines.append(f"  models: {', '.join(target.models)}")
    lines += [f"  adapted: {change}" for change in target.adaptations]
    if target.env:
        lines.append(f"  env: {' '.join(f'{k}={v}' for k, v in target.env.items())}")
    return "\n".join(lines)


def is_builtin(spec: str) -> bool:
    # `testbed[tsan]:B9`: the name before any flavour and switches.
    return spec.partition(":")[0].partition("[")[0] in BUILTIN_TARGETS
