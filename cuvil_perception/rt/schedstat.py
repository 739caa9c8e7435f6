"""Time the calling thread spent runnable but waiting for a CPU (Linux ``schedstat``).

``/proc/thread-self/schedstat`` holds three numbers: ns on the CPU, ns waiting on a run queue
(``run_delay``), timeslices. The tag check divides a stage's CPU time by its wall time *minus*
its run-queue wait: on a busy machine (more runnable threads than cores) a compute stage waits
for a core through no fault of its own, and that wait is not "blocking on IO, a lock or the GIL".
Each thread keeps its own file descriptor open (``pread`` costs ~1.5 us); where the file does
not exist the wait reads as 0 and the check falls back to plain cpu / wall.
"""

from __future__ import annotations

import os
import threading

_PATH = "/proc/thread-self/schedstat"
_local = threading.local()


def run_delay_ns() -> int:
    """Cumulative run-queue wait of the calling thread, ns (0 when unavailable)."""
    fd = getattr(_local, "fd", None)
    if fd is None:
        try:
            fd = os.open(_PATH, os.O_RDONLY)
        except OSError:
            fd = -1
        _local.fd = fd
    if fd < 0:
        return 0
    try:
        fields = os.pread(fd, 96, 0).split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return 0
