"""``perf record`` as the sampler, and ``perf script`` output read into `Stacks`.

perf reads the worker's perf map itself, names threads by their OS names (``comm``) and, on
Python 3.12+ with the perf trampoline (``PYTHONPERFSUPPORT=1``, set for the worker), shows
Python functions as ``py::NAME:FILE``. Its call stacks come from frame pointers: code built
without them (this CPython 3.11, ONNX Runtime, the JIT kernels) cuts a stack short, which is why
py-spy is the default sampler (see docs/profiling.md, "Which sampler").
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .frames import fold_repeats, perf_frame, trim_thread_start
from .stacks import Stacks


def executable() -> str | None:
    return shutil.which("perf")


def command(pid: int, rate_hz: int, out: Path) -> list[str]:
    """Sample ``pid`` (all its threads) ``rate_hz`` times a second with call stacks until it
    exits; the CPU clock, so it works where no hardware counters are exposed (VMs)."""
    return [executable() or "perf", "record", "-e", "cpu-clock", "-F", str(rate_hz), "-g",
            "-p", str(pid), "-o", str(out), "--quiet"]


def script(data: Path) -> str:
    """``perf script`` of ``data``: thread name, tid, and per frame address, symbol, library."""
    done = subprocess.run([executable() or "perf", "script", "-i", str(data), "-F",
                           "comm,tid,ip,sym,dso"], capture_output=True, text=True,
                          errors="replace", check=False)
    return done.stdout


def read_script(text: str, rate_hz: float) -> Stacks:
    """``perf script`` text (a ``comm tid`` line, then one ``addr sym (dso)`` line per frame,
    leaf first; samples separated by blank lines) as `Stacks`."""
    out = Stacks(rate_hz=rate_hz)
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        thread = lines[0].strip().rsplit(None, 1)[0] if " " in lines[0].strip() \
            else lines[0].strip()
        frames = [_frame(line) for line in lines[1:]]
        out.add([thread] + trim_thread_start(fold_repeats(list(reversed(frames)))))
    return out


def _frame(line: str) -> str:
    parts = line.strip().split(None, 1)
    rest = parts[1] if len(parts) > 1 else ""
    symbol, _, dso = rest.rpartition(" (")
    if not _:
        symbol, dso = rest, ""
    return perf_frame(symbol.strip(), dso.rstrip(")"))
