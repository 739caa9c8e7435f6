"""Frame names as a profile shows them, from what a profiler reports.

- Python code: ``PointPillars.detect (cuvil_perception/ops/pillars/model.py)``, the function's
  qualified name and file (py-spy's form; perf's ``py::NAME:FILE`` trampoline frames of
  Python 3.12+ are rewritten to it).
- Native kernels (JIT code in anonymous memory): their perf map name, ``cuvil:pillars.pillarize``.
- A shared library with symbols: ``PyUFunc_AddLoop (_multiarray_umath.so)``; without them (the
  ONNX Runtime wheel ships its library stripped) the library alone,
  ``[onnxruntime_pybind11_state.so]``; consecutive frames of one stripped library fold into one.
- An address nothing names: ``[unknown]``.

Library names drop their folder and CPython ABI tag (``.cpython-311-x86_64-linux-gnu``).
"""

from __future__ import annotations

import re

from .perfmap import PerfMap

UNKNOWN = "[unknown]"
# Functions a thread blocks in (locks, queues, condition variables, sleeps, polls): a sample
# with one of them among its last `WAIT_DEPTH` frames is a waiting thread, not work. py-spy
# reports such threads as busy now and then (notably inside PyThread_acquire_lock_timed).
WAITS = frozenset({
    "PyThread_acquire_lock_timed", "pthread_cond_wait", "pthread_cond_timedwait",
    "pthread_cond_clockwait", "sem_wait", "sem_timedwait", "sem_clockwait",
    "__futex_abstimed_wait_common", "epoll_wait", "poll", "__poll", "select",
    "__select", "nanosleep", "clock_nanosleep", "__clock_nanosleep", "pthread_join",
    "Condition.wait (threading.py)", "Event.wait (threading.py)", "sleep"})
WAIT_DEPTH = 4
_ADDRESS = re.compile(r"0x([0-9a-fA-F]+)(?: \((.*)\))?")
_ABI_TAG = re.compile(r"\.cpython-[^.]*|\.abi3")


def library(path: str) -> str:
    """``onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so`` ->
    ``onnxruntime_pybind11_state.so``."""
    return _ABI_TAG.sub("", path.rsplit("/", 1)[-1])


def native_frame(raw: str, perf_map: PerfMap) -> str:
    """py-spy's name of a frame (``func (file)``, ``0xADDR (lib)``, ``0xADDR (?)``) as shown."""
    match = _ADDRESS.fullmatch(raw)
    if match is not None:
        where = match.group(2)
        if where in (None, "?", ""):
            return perf_map.name(int(match.group(1), 16)) or UNKNOWN
        return f"[{library(where)}]"
    name, sep, where = raw.rpartition(" (")
    if sep and where.endswith(")") and (".so" in where or where.startswith("[")):
        return f"{name} ({library(where[:-1])})"
    return raw


def perf_frame(symbol: str, dso: str) -> str:
    """perf script's ``symbol`` and ``(dso)`` of one frame, named as py-spy's frames are."""
    if symbol.startswith("py::"):  # Python 3.12+ perf trampoline: py::qualname:/path/file.py
        name, _, path = symbol[4:].partition(":")
        return f"{name} ({_short_py(path)})"
    if symbol.startswith("cuvil:"):
        return symbol.split("+", 1)[0]
    if symbol in ("", "[unknown]"):
        return f"[{library(dso)}]" if dso not in ("", "[unknown]") else UNKNOWN
    return f"{symbol.split('+', 1)[0]} ({library(dso)})"


def _short_py(path: str) -> str:
    """A Python file as py-spy shows it: from the package folder on (site-packages cut)."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    return "/".join(path.split("/")[-3:])


def fold_repeats(frames: list[str]) -> list[str]:
    """Consecutive equal library-only frames (``[lib.so]``) as one; ``[unknown]`` frames only
    as the leaf (between frames they are call glue, e.g. ctypes' call into a kernel)."""
    out: list[str] = []
    for i, frame in enumerate(frames):
        if frame == UNKNOWN and i < len(frames) - 1:
            continue
        if out and frame == out[-1] and frame.startswith("["):
            continue
        out.append(frame)
    return out


def is_wait(frames: list[str]) -> bool:
    """Whether the sample's thread was blocked (see `WAITS`), judged on its last frames."""
    for frame in frames[-WAIT_DEPTH:]:
        if frame in WAITS or frame.split(" (", 1)[0] in WAITS:
            return True
    return False


def is_python(frame: str) -> bool:
    return frame.endswith(".py)") or "(<frozen " in frame


def trim_thread_start(frames: list[str]) -> list[str]:
    """Without the native frames before the first Python frame (clone, start_thread,
    thread_run, Py_RunMain): py-spy unwinds them on some samples and not on others, which
    would split one thread's graph in two. Stacks with no Python frame stay whole."""
    for i, frame in enumerate(frames):
        if is_python(frame):
            return frames[i:]
    return frames
