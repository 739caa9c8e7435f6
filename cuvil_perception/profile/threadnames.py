"""The OS names of the profiled workers' threads, polled from the parent process.

The samplers report threads by OS thread id; the names that tell them apart
(``cuvil-compute_0``, ``cuvil-io-drive``...) are the ones the executor gives its threads
(`os_threads`), read from ``/proc/<pid>/task/<tid>/comm``. Each run starts new threads and ends
them, so the names are read while the runs go (every ``period_s``), and kept after the threads
end. The poller runs here, in the parent, not in the worker: py-spy ``--native`` stops the
worker and unwinds every one of its Python threads for each sample, so a helper thread inside
it would add to every sample's cost (docs/profiling.md, "What recording costs").
"""

from __future__ import annotations

import os
import threading

MAIN = "main"  # the worker's main thread: its OS name is the process's (python)


class ThreadNames:
    """Polls the threads of ``pids`` every ``period_s`` between `start` and `stop`:
    ``names[pid]`` maps OS tid -> thread name (the main thread ``MAIN``)."""

    def __init__(self, pids: list[int], period_s: float = 0.02):
        self.names: dict[int, dict[int, str]] = {pid: {pid: MAIN} for pid in pids}
        self._period, self._done = period_s, threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cuvil-prof-names", daemon=True)

    def start(self) -> "ThreadNames":
        self._thread.start()
        return self

    def stop(self) -> dict[int, dict[int, str]]:
        """Stops polling after one last poll (again: a no-op); the names seen."""
        if not self._done.is_set():
            self._done.set()
            if self._thread.is_alive():
                self._thread.join()
            self.poll()
        return self.names

    def _loop(self) -> None:
        while not self._done.wait(self._period):
            self.poll()

    def poll(self) -> None:
        for pid, names in self.names.items():
            try:
                entries = list(os.scandir(f"/proc/{pid}/task"))
            except OSError:  # the worker has exited
                continue
            for entry in entries:
                tid = int(entry.name)
                if tid == pid:
                    continue
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                        names[tid] = fh.read().strip()
                except OSError:  # the thread ended meanwhile
                    pass
