"""One job slot on one node of a Ray fleet: the body of the actor `pool` starts there.

It runs schedules exactly as a local job slot does (its own zygote, or persistent worker,
against this node's copy of the EP library) and returns them judged, so stderr, traces and
sanitizer reports are read where they were written. Every process it starts inherits
`NODE_ENV`, so what a node left behind can be found by it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.execute.executor import RunOptions
from racefuzz.execute.runner import Runner
from racefuzz.judge.outcome import RunResult
from racefuzz.report import envinfo
from racefuzz.schedule.model import Schedule
from racefuzz.targets import preflight
from racefuzz.targets.gpu import package_library
from racefuzz.targets.model import Target, is_builtin
from racefuzz.targets.registry import load_target

NODE_ENV = "RACEFUZZ_RAY_NODE"  # the Ray node id, in every process a node slot starts


def localized(target: Target, spec: str) -> Target:
    """The driver's target with this node's libraries: as given where their paths exist here
    (a shared path, a package installed alike), a `{package = ...}` library where this node's
    copy of the package says, else a built-in target loaded on this node (the testbed is built
    into the node's own cache). The driver's models and env are kept."""
    if all(lib.path.is_file() for lib in target.libraries):
        return target
    if is_builtin(spec):
        here = load_target(spec)
        return replace(here, models=target.models, env=target.env)
    libraries = []
    for lib in target.libraries:
        if not lib.path.is_file() and lib.package is None:
            raise RacefuzzError(f"no EP library '{lib.path}' on this node")
        if not lib.path.is_file():
            assert lib.package is not None
            found = package_library(lib.package, lib.package, f"package '{lib.package}'")
            lib = replace(lib, path=found)
        libraries.append(lib)
    return replace(target, libraries=tuple(libraries))


def needs_gpu(target: Target) -> bool:
    """Whether the target's sessions need a real GPU (the testbed's 'gpu' device is its own
    simulation, on the CPU)."""
    gpu = any(p.device_type == "gpu" for p in target.profiles)
    return gpu and not target.name.startswith("testbed")


def device_kind(target: Target, env: dict[str, Any]) -> str:
    """'gpu: NVIDIA H200' for a target that needs a GPU (the one Ray gave this slot), else
    'cpu: <model>'."""
    gpus = env.get("gpus") or []
    if needs_gpu(target) and gpus:
        return f"gpu: {gpus[0].get('name') or gpus[0].get('vendor') or 'GPU'}"
    return f"cpu: {(env.get('cpu') or {}).get('model') or 'unknown'}"


class NodeSlot:
    def __init__(
        self, target: Target, spec: str, options: RunOptions, zygote: bool, persistent: bool
    ) -> None:
        import ray

        context = ray.get_runtime_context()
        os.environ[NODE_ENV] = context.get_node_id()
        ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self.node = f"{ip}/{context.get_node_id()[:8]}"
        self.problem = ""
        self.device = ""
        self.env: dict[str, Any] = {}
        try:
            self.target = localized(target, spec)
        except RacefuzzError as e:
            self.problem, self.target = str(e), target
        self.runner = Runner(self.target, options, zygote=zygote, persistent=persistent)
        self.launcher = self.runner.launcher()

    def check(self, ort_version: str, probe: bool) -> dict[str, Any]:
        """Whether this node can take work: its onnxruntime is the driver's and the target's
        preflight passes here (`probe`: once per node). Its env.json facts and device kind."""
        self.env = envinfo.collect(self.target)
        self.device = device_kind(self.target, self.env)
        here = self.env.get("onnxruntime")
        problem = self.problem
        if not problem and here != ort_version:
            problem = f"onnxruntime {here or 'not installed'}, the driver has {ort_version}"
        if not problem and probe:
            try:
                preflight.check(self.target)
            except RacefuzzError as e:
                problem = str(e)
        return {"node": self.node, "device": self.device, "env": self.env, "problem": problem}

    def run(self, schedule: Schedule, options: RunOptions) -> RunResult:
        result = replace(self.runner, options=options).run(schedule, self.launcher)
        return replace(result, node=self.node, device=self.device)

    def close(self) -> None:
        """End this slot's workers (its zygote and whatever runs), before the actor goes."""
        self.runner.close()
        if self.launcher is not None:
            self.launcher.close()
        executor.kill_all()
