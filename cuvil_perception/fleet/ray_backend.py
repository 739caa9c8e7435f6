"""The Ray backend: one Ray task per drive on a cluster (``--ray ADDRESS``) or a local Ray.

- Joining: ``ray_connect.join`` (``auto`` honours ``RAY_ADDRESS``; ``local`` is private and
  bound to 127.0.0.1). A Ray already initialised in this process (a notebook, a test) is used
  as it is and left running. Ray's own messages go to ``OUT/ray.log``.
- Each drive task asks for ``num_cpus`` = the compute threads of its run, so Ray packs as many
  drives per node as the node has cores for.
- Prewarm once per node: before any drive, one ``prewarm_node`` task is pinned to every alive
  node with CPUs (``NodeAffinitySchedulingStrategy``, keyed by node id). It fills the node's
  kernel cache, reports the cuvil-perception the node imports (a version or source other than
  the driver's: a usage error, exit 2, before any drive runs) and the drives the node cannot
  read. A node lost during the prewarm is left out; the fleet goes on with the others.
- Drives that travel: a drive (a local path) that some node cannot read is shipped: the driver
  reads its bytes once (``transport.pack``) into Ray's object store, and the task gets them
  beside the path; a node that can read the path uses the path. A drive named by URL is read by
  each node through fsspec.
- Retries are the fleet's, not Ray's (``max_retries=0``): a task whose worker died or whose node
  was lost comes back as a failed, retryable outcome, and the driver decides, the same way it
  does for the local pool. A retry that must avoid a node is pinned (softly) to another one.

Ray is an optional dependency (the ``fleet`` extra): it is imported only here, only for
``--ray``. The pipeline's models and relative paths must be readable on every node (the
package's own models are, wherever it is installed); outputs come back to the driver.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from ..errors import UsageError
from .local import died_outcome
from .node_prewarm import package_identity, prewarm_node
from .ray_connect import INSTALL_HINT, join, route_logs
from .task import DriveTask, FleetJob, execute
from .transport import is_url, pack


def import_ray():
    """The ``ray`` module, or a UsageError saying which extra installs it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class RayBackend:
    """``start`` / ``submit`` / ``wait`` / ``close`` on Ray (see the module docstring)."""

    def __init__(self, address: str, cpus_per_task: int, ship_package: bool = False):
        if not address or not address.strip():
            raise UsageError("--ray needs an address: auto, local, HOST:PORT or ray://HOST:PORT")
        self.ray = import_ray()
        self.address = address.strip()
        self.cpus = cpus_per_task
        self.ship_package = ship_package
        self.log_path: Path | None = None  # set by the CLI: OUT/ray.log
        self.joined = ""
        self.slots = 1
        self._owned = False
        self._stack = ExitStack()
        self._pending: dict = {}
        self._shipped: dict[int, object] = {}  # drive index -> ObjectRef of its bytes
        self._unreadable: dict[str, set[int]] = {}  # node id -> drives it cannot read
        self._job_ref = None
        self._remote = None

    def describe(self) -> str:
        ray = self.ray
        nodes = _alive(ray) if ray.is_initialized() else []
        cpus = sum(n["Resources"].get("CPU", 0) for n in nodes)
        where = self.joined or f"Ray at {self.address}"
        return f"{where}: {len(nodes)} node(s), {cpus:g} CPU(s), {self.cpus} CPU(s) per drive"

    def connect(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            self.joined = join(ray, self.address, self.ship_package, self.log_path)
            self._owned = True
        self._stack.enter_context(route_logs(ray, self.log_path))

    def start(self, job: FleetJob, drives: list[str]) -> list[dict]:
        """Join Ray, prewarm every node once (in parallel), check what each node has, and
        size the submission window."""
        ray = self.ray
        self.connect()
        nodes = [n for n in _alive(ray) if n["Resources"].get("CPU", 0) >= 1]
        total = sum(n["Resources"]["CPU"] for n in nodes)
        if total < self.cpus:
            raise UsageError(f"--ray {self.address}: no node has {self.cpus} CPU(s) for one "
                             f"drive (the cluster has {total:g}); lower --workers")
        self._job_ref = ray.put(job)
        self._drives = drives
        self._remote = ray.remote(_run_drive)
        rows = self._prewarm(nodes, drives)
        _check_versions(rows)
        self._unreadable = {r["where"]["node"]: set(r.get("unreadable", [])) for r in rows
                            if not r.get("lost")}
        self.slots = max(1, int(total // self.cpus)) * 2  # queue one extra drive per slot
        return rows

    def _prewarm(self, nodes: list[dict], drives: list[str]) -> list[dict]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        remote = ray.remote(prewarm_node)
        refs = [remote.options(num_cpus=1, max_retries=0, scheduling_strategy=(
            NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))).remote(self._job_ref,
                                                                             drives)
            for n in nodes]
        rows = []
        for node, ref in zip(nodes, refs):
            try:
                rows.append(ray.get(ref))
            except ray.exceptions.RayTaskError as exc:  # the task ran and could not start
                raise UsageError(_import_problem(node, exc)) from None
            except ray.exceptions.RayError as exc:  # the node (or its worker) was lost
                rows.append(_lost_row(node, exc))
        return rows

    def submit(self, task: DriveTask) -> None:
        options = {"num_cpus": self.cpus, "max_retries": 0}
        target = self._elsewhere(task.avoid)
        if target is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(target, soft=True)
        ref = self._remote.options(**options).remote(self._job_ref, task, self._bytes(task))
        self._pending[ref] = task

    def _elsewhere(self, avoid: tuple[str, ...]) -> str | None:
        """An alive node with CPUs for a drive, not in ``avoid`` (None: no need, or none)."""
        if not avoid:
            return None
        for node in _alive(self.ray):
            if node["NodeID"] not in avoid and node["Resources"].get("CPU", 0) >= self.cpus:
                return node["NodeID"]
        return None

    def _bytes(self, task: DriveTask):
        """The ObjectRef of the drive's bytes when a node may not read it, else None."""
        if is_url(task.drive):
            return None
        alive = {n["NodeID"] for n in _alive(self.ray)}
        blind = any(task.index in self._unreadable.get(node, ()) for node in alive)
        if not (task.ship or blind):
            return None
        if task.index not in self._shipped:
            try:
                self._shipped[task.index] = self.ray.put(pack(task.drive))
            except OSError:  # the driver cannot read it either: the task will say why
                return None
        return self._shipped[task.index]

    def wait(self, timeout: float) -> list[tuple[DriveTask, dict]]:
        if not self._pending:
            return []
        ray = self.ray
        ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending),
                            timeout=timeout, fetch_local=True)
        done = []
        for ref in ready:
            task = self._pending.pop(ref)
            try:
                outcome = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker or its node died: retryable
                outcome = died_outcome(None, {"host": None, "pid": None, "node": None})
                outcome["error"]["type"] = type(exc).__name__
                outcome["error"]["message"] = f"the Ray task was lost: {_first_line(exc)}"
            if outcome["status"] == "ok" or not (outcome.get("error") or {}).get("retryable"):
                self._shipped.pop(task.index, None)  # final: its bytes can go
            done.append((task, outcome))
        return done

    def close(self, cancel: bool) -> None:
        ray = self.ray
        if cancel:
            for ref in list(self._pending):
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or gone: nothing to stop
                    pass
        self._pending.clear()
        self._shipped.clear()
        if self._owned and ray.is_initialized():
            ray.shutdown()
            self._owned = False
        self._stack.close()


def _alive(ray) -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _lost_row(node: dict, exc: BaseException) -> dict:
    """The prewarm row of a node lost before it answered."""
    return {"where": {"host": node.get("NodeManagerHostname"), "pid": None,
                      "node": node["NodeID"]}, "kernels": 0, "compiled": 0, "lost": True,
            "error": {"type": type(exc).__name__, "retryable": True,
                      "message": f"the node was lost during the prewarm: {_first_line(exc)}"}}


def _import_problem(node: dict, exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    where = f"Ray node {node['NodeID'][:12]} ({node.get('NodeManagerHostname')})"
    if "cuvil_perception" in text and ("No module named" in text or "ModuleNotFound" in text):
        return (f"{where} cannot import cuvil_perception: install the same version there, or "
                "pass --ship-package (Ray's runtime_env then sends this one)")
    return f"{where} cannot run the fleet's prewarm task: {text[:300]}"


def _check_versions(rows: list[dict]) -> None:
    """Every node that answered imports the driver's cuvil-perception (version and source)."""
    mine = package_identity()
    for row in rows:
        if row.get("lost") or "version" not in row:
            continue
        theirs = {"version": row["version"], "source": row["source"]}
        if theirs != mine:
            where = row["where"]
            raise UsageError(
                f"Ray node {str(where.get('node'))[:12]} ({where.get('host')}) runs "
                f"cuvil-perception {theirs['version']} (source {theirs['source']}), this "
                f"driver {mine['version']} (source {mine['source']}): install the same there, "
                "or pass --ship-package (Ray's runtime_env then sends this one)")


def _run_drive(job: FleetJob, task: DriveTask, shipped: dict | None) -> dict:
    """The Ray task body (a module-level function, so workers import it by name); ``shipped``
    (an ObjectRef when submitted) arrives as the drive's bytes, or None."""
    return execute(job, task, shipped)
