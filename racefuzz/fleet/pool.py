"""The driver's side of a Ray fleet: node slot actors set up, handed out, replaced.

Each node gets one `NodeSlot` actor per job slot (`--jobs` per node; default its CPUs, or its
GPUs for a GPU target, one GPU each so that Ray sets CUDA_VISIBLE_DEVICES). A node's first actor
checks it (onnxruntime version, the target's preflight) before any gets work; a node that fails
is left out with one line. Idle actors wait in a pool: a campaign slot takes one per run, so a
slow node only slows its own runs. A watcher thread sets up nodes that join and replaces actors
that died on live nodes. A run whose actor died with its node is counted `lost` and run again
elsewhere: a node's loss is never a finding.

Ray's calls block, so they run in the campaign's job threads, never in trio's.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from racefuzz.errors import RacefuzzError
from racefuzz.execute.executor import RunOptions
from racefuzz.execute.zygote_pool import LauncherClosed
from racefuzz.fleet.node_slot import NodeSlot, needs_gpu
from racefuzz.judge.outcome import RunResult
from racefuzz.report.envinfo import ort_version
from racefuzz.schedule.model import Schedule
from racefuzz.targets.model import Target

SETUP_S = 600.0  # a node's first actor may build the testbed before its preflight
CONNECT_S = 10.0  # to reach the head's port
WATCH_S = 2.0  # how often the watcher looks for nodes that joined or actors that died
# What a call to an actor raises when the actor or its node is gone.
_GONE = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)


@dataclass(eq=False)  # one actor is itself: lists find it by identity
class NodeActor:
    handle: Any  # the Ray actor handle
    node_id: str
    node: str = ""  # "ip/node-id prefix", once checked
    device: str = ""


class RayFleet:
    def __init__(
        self,
        target: Target,
        spec: str,
        options: RunOptions,
        *,
        zygote: bool = True,
        persistent: bool = False,
        per_node: int | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.target, self.spec, self.options = target, spec, options
        self.zygote, self.persistent = zygote, persistent
        self.per_node = per_node
        self.say = say
        self.gpu = needs_gpu(target)
        self._lost = 0
        self._idle: list[NodeActor] = []
        self._all: list[NodeActor] = []
        self._nodes: dict[str, str] = {}  # node id -> its label, or "" while left out
        self._envs: dict[str, dict[str, Any]] = {}  # node label -> its env.json facts
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._ort = ort_version() or "not installed"
        self._actor = ray.remote(NodeSlot)
        self.slots = 0  # job slots at the start: the campaign's jobs

    # --- setting up ---------------------------------------------------------------------

    def start(self, address: str) -> int:
        """Connect, check every node, start the slots; how many slots the fleet has."""
        _reachable(address)
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise RacefuzzError(f"cannot join the Ray cluster at '{address}': {e}") from None
        self._set_up(list(_alive_nodes().values()))
        if not self._all:
            raise RacefuzzError(f"no node of the Ray cluster at '{address}' can run the target")
        threading.Thread(target=self._watch, name="racefuzz-fleet-watch", daemon=True).start()
        self.slots = len(self._all)
        return self.slots

    def _slots_on(self, node: dict[str, Any]) -> int:
        resources = node.get("Resources") or {}
        have = int(resources.get("GPU" if self.gpu else "CPU", 0))
        return min(self.per_node, have) if self.per_node is not None else have

    def _new_actor(self, node_id: str) -> NodeActor:
        need = {"num_gpus": 1, "num_cpus": 0} if self.gpu else {"num_cpus": 1}
        handle = self._actor.options(
            **need,
            max_concurrency=2,  # `close` while a run is in flight
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self.target, self.spec, self.options, self.zygote, self.persistent)
        return NodeActor(handle, node_id)

    def _set_up(self, nodes: list[dict[str, Any]]) -> None:
        """Check each node with its first actor (in parallel), then start its other slots."""
        first: list[tuple[dict[str, Any], NodeActor, Any]] = []
        for node in nodes:
            node_id = str(node["NodeID"])
            self._nodes[node_id] = ""
            if self._slots_on(node) < 1:
                self.say(f"Ray node {_label(node)} left out: no free {self._unit()}")
                continue
            actor = self._new_actor(node_id)
            first.append((node, actor, actor.handle.check.remote(self._ort, True)))
        for node, actor, ref in first:
            try:
                seen = ray.get(ref, timeout=SETUP_S)
            except Exception as e:  # an actor that cannot start is that node's problem
                seen = {"problem": _first_line(e), "node": _label(node)}
            if seen["problem"]:
                ray.kill(actor.handle)
                self.say(f"Ray node {seen['node']} left out: {seen['problem']}")
                continue
            actor.node, actor.device = seen["node"], seen["device"]
            self._nodes[actor.node_id] = actor.node
            self._envs[actor.node] = seen["env"]
            slots = [actor, *self._more(actor.node_id, self._slots_on(node) - 1)]
            self._add(slots)
            self.say(f"Ray node {actor.node}: {len(slots)} slot(s), {actor.device}")

    def _more(self, node_id: str, n: int) -> list[NodeActor]:
        """`n` more slots on a node already checked, without a second preflight."""
        made = [self._new_actor(node_id) for _ in range(n)]
        kept = []
        for actor in made:
            try:
                seen = ray.get(actor.handle.check.remote(self._ort, False), timeout=SETUP_S)
            except Exception:
                ray.kill(actor.handle)
                continue
            actor.node, actor.device = seen["node"], seen["device"]
            kept.append(actor)
        return kept

    def _add(self, actors: list[NodeActor]) -> None:
        with self._cond:
            self._all += actors
            self._idle += actors
            self._cond.notify_all()

    def _unit(self) -> str:
        return "GPU" if self.gpu else "CPU"

    def _watch(self) -> None:
        """Set up nodes that joined; give live nodes back the slots whose actors died."""
        while not self._closed.wait(WATCH_S):
            try:
                alive = _alive_nodes()
            except Exception:
                continue  # the head is busy or gone for a moment: look again later
            joined = [n for node_id, n in alive.items() if node_id not in self._nodes]
            if joined:
                self._set_up(joined)
            for node_id in {a.node_id for a in self._all} - set(alive):
                self.say(f"Ray node {self._nodes[node_id]} left the cluster: its slots are gone")
            with self._cond:
                self._all = [a for a in self._all if a.node_id in alive]
                self._idle = [a for a in self._idle if a.node_id in alive]
                short = {
                    node_id: self._slots_on(alive[node_id])
                    - sum(a.node_id == node_id for a in self._all)
                    for node_id, label in self._nodes.items()
                    if label and node_id in alive
                }
            for node_id, n in short.items():
                if n > 0 and not self._closed.is_set():
                    self._add(self._more(node_id, n))

    # --- running ------------------------------------------------------------------------

    @property
    def lost(self) -> int:
        return self._lost

    def node_env(self, node: str) -> dict[str, Any] | None:
        return self._envs.get(node)

    def _take(self, device: str | None) -> NodeActor:
        with self._cond:
            while True:
                if self._closed.is_set():
                    raise LauncherClosed("the fleet has stopped")
                kinds = {a.device for a in self._all}
                want = device if device in kinds else None  # that kind's nodes are all gone
                for i, actor in enumerate(self._idle):
                    if want is None or actor.device == want:
                        return self._idle.pop(i)
                self._cond.wait(1.0)

    def _give_back(self, actor: NodeActor) -> None:
        with self._cond:
            if actor in self._all:
                self._idle.append(actor)
            self._cond.notify_all()

    def _drop(self, actor: NodeActor) -> None:
        with self._cond:
            if actor in self._all:
                self._all.remove(actor)
            self._cond.notify_all()

    def run(self, schedule: Schedule, options: RunOptions, device: str | None) -> RunResult:
        while True:
            actor = self._take(device)
            try:
                result: RunResult = ray.get(actor.handle.run.remote(schedule, options))
            except _GONE:
                self._drop(actor)
                if self._closed.is_set():
                    raise LauncherClosed("the fleet stopped while the schedule ran") from None
                with self._cond:
                    self._lost += 1
                self.say(f"a run was lost with Ray node {actor.node}: not a finding, run again")
                continue  # on another node: its node's loss says nothing of the schedule
            except ray.exceptions.RayTaskError as e:  # racefuzz's own failure on the node
                self._give_back(actor)
                raise e.as_instanceof_cause() from None  # type: ignore[no-untyped-call]
            self._give_back(actor)
            return result

    def close(self) -> None:
        """Stop every actor: each ends its workers, then goes (killed if it does not)."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._cond:
            actors, self._all, self._idle = list(self._all), [], []
            self._cond.notify_all()
        if not actors or not ray.is_initialized():
            return  # (any call of Ray's would start a local Ray instance)
        closing = [a.handle.close.remote() for a in actors]
        with contextlib.suppress(Exception):  # a node gone meanwhile: its actor is too
            ray.wait(closing, num_returns=len(closing), timeout=10.0)
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor.handle)

    def shutdown(self) -> None:
        self.close()
        if ray.is_initialized():
            ray.shutdown()


def _reachable(address: str) -> None:
    """A `host:port` nobody listens on is one line at once (Ray itself retries for minutes)."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or "://" in address:
        return  # `auto`, a `ray://` client address: Ray says what is wrong itself
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_S).close()
    except OSError as e:
        raise RacefuzzError(f"cannot reach the Ray cluster at '{address}': {e}") from None


def _alive_nodes() -> dict[str, dict[str, Any]]:
    """The cluster's live nodes by id, as `ray.nodes()` describes them."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return {str(n["NodeID"]): n for n in nodes if n.get("Alive")}


def _label(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')}/{str(node.get('NodeID', ''))[:8]}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
