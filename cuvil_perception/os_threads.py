"""OS names for the threads cuvil-perception starts, so that ``top -H``, ``ps -L``, ``chrt -p``,
perf and /proc/<pid>/task/<tid>/comm tell them apart (without one, every thread shows the
process name, ``cuvil-perceptio``).

Python's ``threading`` names stay inside the interpreter; the kernel's name is set by the thread
itself: Linux ``prctl(PR_SET_NAME)`` (what ``pthread_setname_np`` does for the calling thread),
macOS ``pthread_setname_np(name)``; elsewhere nothing is named. The kernel keeps 15 bytes, so a
longer name keeps its head and its tail (the part that tells siblings apart):
``cuvil-io-foxglove_live`` -> ``cuvil-i~ve_live``. Never called on the main thread: its name
is the process's name in ``ps`` and ``top``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

MAX_BYTES = 15  # TASK_COMM_LEN 16, the terminating NUL included
PR_SET_NAME = 15
HEAD = 7  # bytes of a long name kept before the "~"

_libc = None


def os_thread_name(name: str) -> str:
    """``name`` as the kernel keeps it: ASCII (others as ``?``), at most ``MAX_BYTES`` bytes;
    a longer name keeps its first ``HEAD`` and its last bytes around a ``~``."""
    text = name.encode("ascii", "replace").decode("ascii")
    if len(text) <= MAX_BYTES:
        return text
    return text[:HEAD] + "~" + text[-(MAX_BYTES - HEAD - 1):]


def _load_libc():
    global _libc
    if _libc is None:
        path = ctypes.util.find_library("c")
        _libc = ctypes.CDLL(path, use_errno=True) if path else False
    return _libc


def name_this_thread(name: str | None = None) -> str | None:
    """Give the calling thread the OS name ``os_thread_name(name)`` (default: its Python name);
    returns the name applied, or None where the OS offers no way (or on the main thread)."""
    if threading.current_thread() is threading.main_thread():
        return None
    short = os_thread_name(threading.current_thread().name if name is None else name)
    libc = _load_libc()
    if not libc:
        return None
    raw = short.encode("ascii")
    if sys.platform.startswith("linux"):
        ok = libc.prctl(PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0) == 0
    elif sys.platform == "darwin":
        ok = libc.pthread_setname_np(ctypes.c_char_p(raw)) == 0
    else:
        return None
    return short if ok else None
