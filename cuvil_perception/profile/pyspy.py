"""py-spy as the sampler: its command line, and its raw output read into `Stacks`.

``py-spy record --native`` unwinds the native stack (DWARF, so through ONNX Runtime and numpy)
and interleaves the Python frames it reads from the interpreter: one profiler that shows Python
stage code and native frames on any CPython 3.x. It does not read perf maps, so native kernels
come out as ``0xADDR (?)``; `frames.native_frame` names them from the worker's map. Thread names
come from the worker's ``tid -> OS name`` list (`threadnames`): py-spy keys its name cache on
the pthread handle, which the next run's threads reuse, so its own names go stale across runs.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from .frames import fold_repeats, is_wait, native_frame, trim_thread_start
from .perfmap import PerfMap
from .stacks import Stacks

_THREAD = re.compile(r"thread \((?:0x)?([0-9A-Fa-f]+)\)(?:: (.*))?")


def executable() -> str | None:
    """py-spy beside this interpreter (a venv's bin/), else on PATH, else None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def command(pid: int, rate_hz: int, out: Path) -> list[str]:
    """Attach to ``pid``, sample ``rate_hz`` times a second until it exits, write raw stacks."""
    return [executable() or "py-spy", "record", "--pid", str(pid), "--native", "--threads",
            "--nolineno", "--format", "raw", "--rate", str(rate_hz), "--output", str(out)]


def read_raw(text: str, perf_map: PerfMap, thread_names: dict[int, str],
             rate_hz: float) -> Stacks:
    """py-spy's raw lines (``thread (TID): NAME;frame;...;leaf COUNT``, root first) as `Stacks`,
    threads named from ``thread_names`` (OS tid -> name) where known. Samples of a blocked
    thread (`frames.is_wait`) are dropped."""
    out = Stacks(rate_hz=rate_hz)
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        raw = stack.split(";")
        thread = _thread_name(raw[0], thread_names)
        if thread is None:
            thread, rest = "process", raw
        else:
            rest = raw[1:]
        frames = fold_repeats([native_frame(f, perf_map) for f in rest])
        if is_wait(frames):
            continue
        out.add([thread] + trim_thread_start(frames), int(count))
    return out


def _thread_name(frame: str, names: dict[int, str]) -> str | None:
    match = _THREAD.fullmatch(frame)
    if match is None:
        return None
    text = match.group(1)
    tid = int(text, 16) if frame.startswith("thread (0x") else int(text)
    return names.get(tid) or match.group(2) or f"thread {tid}"
