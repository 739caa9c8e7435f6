"""The Ray backend: one Ray task per drive on a cluster (``--ray ADDRESS``) or a local Ray.

- ``--ray auto`` / ``--ray HOST:PORT`` / ``--ray ray://HOST:10001``: ``ray.init(address=...)``
  joins an existing cluster; ``--ray local`` starts a Ray on this machine (all its cores) and
  stops it at the end. A Ray already initialised in this process (a notebook, a test) is used
  as it is and left running.
- Each drive task asks for ``num_cpus`` = the compute threads of its run, so Ray packs as many
  drives per node as the node has cores for.
- Prewarm once per node: before any drive, one ``prewarm_node`` task is pinned to every alive
  node with CPUs (``NodeAffinitySchedulingStrategy``, keyed by node id), so the kernels are in
  each node's cache before that node's first drive.
- Retries are the fleet's, not Ray's (``max_retries=0``): a task whose worker died or whose node
  was lost comes back as a failed, retryable outcome, and the driver decides, the same way it
  does for the local pool.

Ray is an optional dependency (the ``fleet`` extra): it is imported only here, only for
``--ray``. Drives, the pipeline's models and relative paths must be readable under the same path
on every node (a shared file system); outputs come back to the driver with the results.
"""

from __future__ import annotations

import os

from ..errors import UsageError
from .local import died_outcome
from .prewarm import prewarm_node
from .task import DriveTask, FleetJob, execute

INSTALL_HINT = "pip install 'cuvil-perception[fleet]'"


def import_ray():
    """The ``ray`` module, or a UsageError saying which extra installs it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class RayBackend:
    """``start`` / ``submit`` / ``wait`` / ``close`` on Ray (see the module docstring)."""

    def __init__(self, address: str, cpus_per_task: int):
        if not address or not address.strip():
            raise UsageError("--ray needs an address: auto, local, HOST:PORT or ray://HOST:PORT")
        self.ray = import_ray()
        self.address = address.strip()
        self.cpus = cpus_per_task
        self.slots = 1
        self._owned = False
        self._pending: dict = {}
        self._job_ref = None
        self._remote = None

    def describe(self) -> str:
        cluster = self.ray.cluster_resources() if self.ray.is_initialized() else {}
        nodes = len([n for n in self.ray.nodes() if n.get("Alive")]) if cluster else 0
        return (f"Ray at {self.address}: {nodes} node(s), {cluster.get('CPU', 0):g} CPU(s), "
                f"{self.cpus} CPU(s) per drive")

    def connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        options = {"include_dashboard": False, "log_to_driver": False,
                   "logging_level": "ERROR"}
        try:
            if self.address == "local":
                ray.init(num_cpus=os.cpu_count() or 1, **options)
            else:
                ray.init(address=self.address, **options)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UsageError(f"--ray {self.address}: cannot start or join Ray "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                             ) from None
        self._owned = True

    def start(self, job: FleetJob, first_drive: str) -> list[dict]:
        """Join Ray, prewarm every node once (in parallel), and size the submission window."""
        ray = self.ray
        self.connect()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
        total = sum(n["Resources"]["CPU"] for n in nodes)
        if total < self.cpus:
            raise UsageError(f"--ray {self.address}: no node has {self.cpus} CPU(s) for one "
                             f"drive (the cluster has {total:g}); lower --workers")
        self._job_ref = ray.put(job)
        self._remote = ray.remote(_run_drive)
        prewarm = ray.remote(prewarm_node)
        refs = [prewarm.options(num_cpus=1, max_retries=0, scheduling_strategy=(
            NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))).remote(self._job_ref,
                                                                             first_drive)
            for n in nodes]
        self.slots = max(1, int(total // self.cpus)) * 2  # queue one extra drive per slot
        return ray.get(refs)

    def submit(self, task: DriveTask) -> None:
        ref = self._remote.options(num_cpus=self.cpus, max_retries=0).remote(self._job_ref, task)
        self._pending[ref] = task

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
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                outcome["error"]["type"] = type(exc).__name__
                outcome["error"]["message"] = f"the Ray task failed: {first[:300]}"
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
        if self._owned and ray.is_initialized():
            ray.shutdown()
            self._owned = False


def _run_drive(job: FleetJob, task: DriveTask) -> dict:
    """The Ray task body (a module-level function, so workers import it by name)."""
    return execute(job, task)
