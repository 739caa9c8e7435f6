"""The default backend: a pool of worker processes on this machine.

``N`` processes (the ``spawn`` start method: a clean interpreter, no state forked from the
driver's threads) each run one drive at a time with ``task.execute`` and send its outcome back
through their own pipe. The driver watches every busy worker's pipe *and* its process sentinel,
so a worker that dies mid-drive (a segfault in native code, the OOM killer, ``os._exit``) is
noticed at once, its drive is known exactly, and a fresh process takes its place.

Workers ignore SIGINT: Ctrl-C reaches the whole process group, and it is the driver that
decides to stop (it terminates the workers; their unfinished drives are not recorded). A worker
whose run that SIGTERM stops (the run ends cleanly, as on Ctrl-C) exits at once and quietly.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_ready

from .node_prewarm import prewarm_node
from .task import DriveTask, FleetJob, execute

MAX_PROCESSES_PER_CORE = 16


def default_processes(workers_per_drive: int) -> int:
    """Cores divided by the compute threads each drive's run uses (at least 1)."""
    return max(1, (os.cpu_count() or 1) // max(1, workers_per_drive))


def _worker_main(conn, job: FleetJob) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            task = conn.recv()
            if task is None:
                return
            conn.send((task, execute(job, task)))
        except (EOFError, OSError):  # the driver went away (stopped, or Ctrl-C): so do we
            return
        except KeyboardInterrupt:  # the driver's SIGTERM (its Ctrl-C) stopped the run: leave
            return  # quietly (a run stops cleanly on SIGTERM; the driver records nothing)


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: object
    task: DriveTask | None = None


class LocalPool:
    """``start`` / ``submit`` / ``wait`` / ``close``: the interface every backend has."""

    def __init__(self, processes: int):
        self.processes = processes
        self.slots = processes
        self._ctx = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        self._job: FleetJob | None = None

    def describe(self) -> str:
        return f"local pool of {self.processes} process(es)"

    def connect(self) -> None:
        """Nothing to join for a local pool (the Ray backend joins its cluster here)."""

    def start(self, job: FleetJob, drives: list[str]) -> list[dict]:
        """Prewarm this machine's kernel cache (here, once), then start the processes."""
        self._job = job
        rows = [prewarm_node(job, drives)]
        self._workers = [self._spawn() for _ in range(self.processes)]
        return rows

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker_main, args=(child, self._job),
                                    name="cuvil-fleet-worker", daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def submit(self, task: DriveTask) -> None:
        worker = next(w for w in self._workers if w.task is None)
        worker.task = task
        worker.conn.send(task)

    def wait(self, timeout: float) -> list[tuple[DriveTask, dict]]:
        """Outcomes of the drives that finished within ``timeout`` s (a dead worker's drive
        comes back as a failed, retryable outcome)."""
        busy = [w for w in self._workers if w.task is not None]
        if not busy:
            return []
        wait_ready([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
        done = []
        for worker in busy:
            outcome = self._collect(worker)
            if outcome is not None:
                done.append((worker.task, outcome))
                worker.task = None
        return done

    def _collect(self, worker: _Worker) -> dict | None:
        try:
            if worker.conn.poll():
                return worker.conn.recv()[1]
        except (EOFError, OSError):
            pass  # the pipe broke: the process is dead or dying
        else:
            if worker.process.is_alive():
                return None
        worker.process.join(5)
        outcome = died_outcome(worker.process.exitcode, {"host": socket.gethostname(),
                                                          "pid": worker.process.pid,
                                                          "node": None})
        self._workers[self._workers.index(worker)] = self._spawn()
        return outcome

    def close(self, cancel: bool) -> None:
        """Stop the workers: at once (``cancel``: Ctrl-C), else after telling them to finish."""
        for worker in self._workers:
            if cancel:
                worker.process.terminate()
            else:
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        for worker in self._workers:
            worker.process.join(5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers = []


def died_outcome(exitcode: int | None, where: dict) -> dict:
    """A failed, retryable outcome for a drive whose worker process died (``where`` it ran)."""
    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode}"
    return {"status": "failed", "where": where,
            "warnings": [], "seconds": None,
            "error": {"type": "WorkerDied", "message": f"the worker process {how}",
                      "retryable": True}}
