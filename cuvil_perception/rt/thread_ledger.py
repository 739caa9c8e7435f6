"""Which threads a run started and which scheduling knobs took effect on each: the run record's
``threads`` and the last placement line ``run`` prints.

Every executor thread starts through ``ThreadLedger.start``: it takes its OS name (``os_threads``:
``cuvil-compute_0``, ``cuvil-io-<stage>``; what ``top -H``, ``ps -L``, ``chrt -p`` and
/proc/<pid>/task/<tid>/comm show), applies its group's ``rt:`` knobs (``knobs``) and adds a
row. The scheduler (the caller's thread, never renamed: its name is the process's) adds its
row through ``knobs.scheduler_thread_knobs``.
"""

from __future__ import annotations

import threading

from ..os_threads import name_this_thread
from .knobs import apply_thread_knobs


class ThreadLedger:
    """Rows ``{"thread", "os_name", "tid", "group", "cpus", "sched", "refused"}``, one per thread
    in the order they started (``cpus`` None: any CPU; ``sched`` None: the default policy)."""

    def __init__(self):
        self._rows: list[dict] = []
        self._lock = threading.Lock()

    def start(self, knobs, group: str, warn, name: str | None = None) -> None:
        """Called first thing on a new thread of ``group`` (``io`` or ``compute``); ``name``
        renames it (Python and OS) when given."""
        if name is not None:
            threading.current_thread().name = name
        name_this_thread()
        self.add(group, apply_thread_knobs(knobs, group, warn))

    def add(self, group: str, applied: dict) -> None:
        """A row for the calling thread: ``applied`` as ``knobs.apply_thread_knobs`` returns it."""
        thread = threading.current_thread()
        row = {"thread": thread.name, "os_name": _comm(), "tid": threading.get_native_id(),
               "group": group, **applied}
        with self._lock:
            self._rows.append(row)

    def rows(self) -> list[dict]:
        with self._lock:
            return [dict(r, refused=list(r["refused"])) for r in self._rows]

    def summary(self) -> str:
        """One line: each distinct outcome and the threads it applies to, e.g. ``threads:
        SCHED_FIFO priority 10, CPUs 1 -> cuvil-compute_0, cuvil-compute_1; default -> ...``."""
        groups: dict[str, list[str]] = {}
        for row in self.rows():
            parts = [row["sched"] or "default scheduler"]
            if row["cpus"]:
                parts.append("CPUs " + ",".join(str(c) for c in row["cpus"]))
            if row["refused"]:
                parts.append("refused " + ", ".join(row["refused"]))
            name = row["os_name"] or row["thread"]
            if row["group"] == "scheduler":  # the caller's thread, named after the process
                name = f"scheduler ({name})"
            groups.setdefault("; ".join(parts), []).append(name)
        return "threads: " + " | ".join(f"{outcome} -> {', '.join(names)}"
                                        for outcome, names in groups.items())


def _comm() -> str | None:
    """The calling thread's OS name as the kernel has it (Linux), else None."""
    try:
        with open("/proc/thread-self/comm", encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None
