"""Which sampler records the run: what is installed and what the kernel lets this user do.

- py-spy (the default): attaches to the worker with ptrace. Unprivileged that needs Yama's
  ``kernel.yama.ptrace_scope`` at 1 or less (the worker allows its user to trace it); 3 forbids
  ptrace even to root.
- perf: unprivileged it needs ``kernel.perf_event_paranoid`` at 2 or less (user-space samples of
  one's own processes); Python frames only on Python 3.12+ (the perf trampoline).

When the requested sampler is not allowed, one line says what to change, and the other one is
used if it is allowed; when neither is, the error carries both lines.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import UsageError
from . import perf, pyspy

SAMPLERS = ("auto", "py-spy", "perf")


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def refusal(sampler: str, root: bool | None = None) -> str | None:
    """Why ``sampler`` cannot run here (one line with what to change), or None if it can."""
    root = os.geteuid() == 0 if root is None else root
    if sampler == "py-spy":
        if pyspy.executable() is None:
            return ("py-spy is not installed (pip install py-spy, or the project's "
                    "'profile' extra)")
        scope = _read_int("/proc/sys/kernel/yama/ptrace_scope")
        if scope is not None and (scope >= 3 or (scope >= 2 and not root)):
            return (f"kernel.yama.ptrace_scope is {scope}: py-spy needs 1 or less to attach "
                    "(sudo sysctl kernel.yama.ptrace_scope=1)")
        return None
    if perf.executable() is None:
        return "perf is not installed (Debian: apt-get install linux-perf)"
    paranoid = _read_int("/proc/sys/kernel/perf_event_paranoid")
    if not root and paranoid is not None and paranoid > 2:
        return (f"kernel.perf_event_paranoid is {paranoid}: perf needs 2 or less "
                "(sudo sysctl kernel.perf_event_paranoid=2)")
    return None


def choose(requested: str, warn, root: bool | None = None) -> str:
    """``py-spy`` or ``perf`` for ``--profiler requested``; ``warn(line)`` for each refusal or
    limit met on the way. Raises UsageError when no sampler can run."""
    first = "py-spy" if requested == "auto" else requested
    other = "perf" if first == "py-spy" else "py-spy"
    why = refusal(first, root)
    if why is None:
        chosen = first
    else:
        why_other = refusal(other, root)
        if why_other is not None:
            raise UsageError(f"no sampler can run here: {why}; {why_other}")
        warn(f"{why}; using {other}")
        chosen = other
    if chosen == "perf" and sys.version_info < (3, 12):
        warn("perf shows no Python frames before Python 3.12 (no perf trampoline): stage "
             "functions appear as the interpreter's own frames")
    return chosen
