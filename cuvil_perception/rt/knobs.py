"""The ``rt:`` block of a pipeline: CPU affinity per worker group, SCHED_FIFO, mlockall.

::

    rt:
      cpu_affinity: {io: [0], compute: [1, 2, 3]}   # CPU ids per thread group
      sched: {policy: fifo, priority: 10}           # SCHED_FIFO for compute and io threads
      mlockall: true                                # lock current and future pages in RAM

Groups: ``io`` (source readers and io-stage threads) and ``compute`` (the worker pool). The block
is checked strictly (unknown keys, wrong types) with the file:line of ``rt:``. The OS may refuse a
knob (no CAP_SYS_NICE, RLIMIT_MEMLOCK, a CPU not in the allowed set): the run continues and the
refusal is one warning line naming the knob and the OS error.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass, field

from ..errors import Location, PipelineError
from ..graph.op import suggest

GROUPS = ("io", "compute")
KEYS = ("cpu_affinity", "sched", "mlockall")
SCHED_KEYS = ("policy", "priority")
_MCL_CURRENT, _MCL_FUTURE = 1, 2


@dataclass
class RtKnobs:
    """Checked ``rt:`` settings; empty means "leave the OS defaults alone"."""

    affinity: dict[str, list[int]] = field(default_factory=dict)
    fifo_priority: int | None = None
    mlockall: bool = False


def parse_knobs(pipeline) -> RtKnobs:
    """Check ``pipeline.rt``; errors name the file:line of the ``rt:`` block and the field."""
    raw = pipeline.rt or {}
    loc = pipeline.locs.get("rt") or Location(pipeline.source)
    knobs = RtKnobs()

    def bad(field_name: str, message: str) -> PipelineError:
        return PipelineError(message, loc, None, f"rt.{field_name}")

    for key in raw:
        if key not in KEYS:
            raise bad(str(key), f"unknown rt knob '{key}'{suggest(str(key), KEYS)} "
                                f"(allowed: {', '.join(KEYS)})")
    affinity = raw.get("cpu_affinity") or {}
    if not isinstance(affinity, dict):
        raise bad("cpu_affinity", "must be a mapping of group (io, compute) to a list of CPU ids")
    for group, cpus in affinity.items():
        if group not in GROUPS:
            raise bad(f"cpu_affinity.{group}", f"unknown worker group '{group}'"
                      f"{suggest(str(group), GROUPS)} (groups: {', '.join(GROUPS)})")
        if not isinstance(cpus, list) or not cpus or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
            raise bad(f"cpu_affinity.{group}", f"must be a non-empty list of CPU ids, got {cpus!r}")
        knobs.affinity[group] = list(cpus)
    sched = raw.get("sched")
    if sched is not None:
        knobs.fifo_priority = _parse_sched(sched, bad)
    mlock = raw.get("mlockall", False)
    if not isinstance(mlock, bool):
        raise bad("mlockall", f"must be true or false, got {mlock!r}")
    knobs.mlockall = mlock
    return knobs


def _parse_sched(sched, bad) -> int:
    if not isinstance(sched, dict):
        raise bad("sched", "must be a mapping like {policy: fifo, priority: 10}")
    for key in sched:
        if key not in SCHED_KEYS:
            raise bad(f"sched.{key}", f"unknown field '{key}'{suggest(str(key), SCHED_KEYS)}")
    if sched.get("policy") != "fifo":
        raise bad("sched.policy", f"only 'fifo' is supported, got {sched.get('policy')!r}")
    priority = sched.get("priority", 10)
    if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 99:
        raise bad("sched.priority", f"must be an integer 1..99, got {priority!r}")
    return priority


def apply_process_knobs(knobs: RtKnobs, warn) -> None:
    """Process-wide knobs (mlockall), applied once before the first frame."""
    if not knobs.mlockall:
        return
    libc_name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(libc_name, use_errno=True) if libc_name else None
    if libc is None or not hasattr(libc, "mlockall"):
        warn("rt.mlockall: not available on this system; memory stays pageable")
        return
    if libc.mlockall(_MCL_CURRENT | _MCL_FUTURE) != 0:
        err = ctypes.get_errno()
        warn(f"rt.mlockall: the OS refused ({os.strerror(err)}; raise RLIMIT_MEMLOCK or run "
             "with CAP_IPC_LOCK); memory stays pageable")


def apply_thread_knobs(knobs: RtKnobs, group: str, warn) -> None:
    """Per-thread knobs, called by each executor thread of ``group`` when it starts."""
    cpus = knobs.affinity.get(group)
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)  # pid 0 = the calling thread on Linux
        except (OSError, AttributeError) as exc:
            warn(f"rt.cpu_affinity.{group}: the OS refused CPUs {cpus} ({exc}); the thread runs "
                 "on any CPU")
    if knobs.fifo_priority is not None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(knobs.fifo_priority))
        except (OSError, AttributeError) as exc:
            warn(f"rt.sched: the OS refused SCHED_FIFO priority {knobs.fifo_priority} for the "
                 f"{group} threads ({exc}; needs CAP_SYS_NICE or an rtprio limit); they keep "
                 "the default scheduler")
