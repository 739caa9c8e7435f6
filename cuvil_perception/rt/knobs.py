"""The ``rt:`` block of a pipeline: CPU affinity per worker group, SCHED_FIFO or SCHED_DEADLINE,
mlockall, cgroup v2 placement.

::

    rt:
      cpu_affinity: {io: [0], compute: [1, 2, 3]}   # CPU ids per thread group
      sched: {policy: fifo, priority: 10}           # SCHED_FIFO for compute and io threads
      # or: {policy: deadline, runtime_ms: 2, deadline_ms: 10, period_ms: 100}: SCHED_DEADLINE
      #     per compute and io thread (sched_deadline.py; period_ms defaults to deadline_ms)
      mlockall: true                                # lock current and future pages in RAM
      cgroup: {name: cuvil, cpu_max: {quota_ms: 50, period_ms: 100}, cpuset: [1, 2]}
      #     move the process into a child cgroup v2 with that quota / CPU set (cgroup.py);
      #     cpu_max: max lifts the quota

Groups: ``io`` (source readers and io-stage threads) and ``compute`` (the worker pool); the
thread that admits and dispatches frames (the scheduler, the caller's thread) takes the
``sched: fifo`` priority for the length of the run (``scheduler_thread_knobs``). The block
is checked strictly (unknown keys, wrong types) with the file:line of ``rt:``. The OS may refuse a
knob (no CAP_SYS_NICE, RLIMIT_MEMLOCK, a CPU not in the allowed set): the run continues and the
refusal is one warning line naming the knob and the OS error. What each thread got is collected
by ``thread_ledger`` (the placement's last line, the run record's ``threads``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import Location, PipelineError
from ..graph.op import suggest
from .cgroup import CgroupPlan, place
from .knob_parse import parse_cgroup, parse_deadline
from .sched_deadline import DeadlineParams, set_deadline

GROUPS = ("io", "compute")
KEYS = ("cpu_affinity", "sched", "mlockall", "cgroup")
SCHED_KEYS = {"fifo": ("policy", "priority"),
              "deadline": ("policy", "runtime_ms", "deadline_ms", "period_ms")}
_MCL_CURRENT, _MCL_FUTURE = 1, 2


@dataclass
class RtKnobs:
    """Checked ``rt:`` settings; empty means "leave the OS defaults alone"."""

    affinity: dict[str, list[int]] = field(default_factory=dict)
    fifo_priority: int | None = None
    deadline: DeadlineParams | None = None
    mlockall: bool = False
    cgroup: CgroupPlan | None = None


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
        if _sched_policy(sched, bad) == "fifo":
            knobs.fifo_priority = _parse_fifo(sched, bad)
        else:
            knobs.deadline = parse_deadline(sched, bad)
    mlock = raw.get("mlockall", False)
    if not isinstance(mlock, bool):
        raise bad("mlockall", f"must be true or false, got {mlock!r}")
    knobs.mlockall = mlock
    if raw.get("cgroup") is not None:
        knobs.cgroup = parse_cgroup(raw["cgroup"], bad)
    return knobs


def _sched_policy(sched, bad) -> str:
    if not isinstance(sched, dict):
        raise bad("sched", "must be a mapping like {policy: fifo, priority: 10}")
    policy = sched.get("policy")
    if policy not in SCHED_KEYS:
        raise bad("sched.policy", f"must be one of {', '.join(SCHED_KEYS)}, got {policy!r}")
    for key in sched:
        if key not in SCHED_KEYS[policy]:
            raise bad(f"sched.{key}", f"unknown field '{key}' for policy {policy}"
                                      f"{suggest(str(key), SCHED_KEYS[policy])}")
    return policy


def _parse_fifo(sched, bad) -> int:
    priority = sched.get("priority", 10)
    if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 99:
        raise bad("sched.priority", f"must be an integer 1..99, got {priority!r}")
    return priority


def apply_process_knobs(knobs: RtKnobs, warn) -> None:
    """Process-wide knobs (cgroup placement, mlockall), applied once before the first frame."""
    if knobs.cgroup is not None:
        place(knobs.cgroup, warn)
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


def apply_thread_knobs(knobs: RtKnobs, group: str, warn) -> dict:
    """Per-thread knobs, called by each executor thread of ``group`` when it starts. Returns
    what took effect on this thread: ``{"cpus": [ids] or None, "sched": "SCHED_FIFO
    priority 10" / "SCHED_DEADLINE runtime ..." or None (the default scheduler), "refused":
    [knob names the OS refused]}`` (``thread_ledger`` collects them)."""
    applied: dict = {"cpus": None, "sched": None, "refused": []}
    cpus = knobs.affinity.get(group)
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)  # pid 0 = the calling thread on Linux
            applied["cpus"] = list(cpus)
        except (OSError, AttributeError) as exc:
            applied["refused"].append("cpu_affinity")
            warn(f"rt.cpu_affinity.{group}: the OS refused CPUs {cpus} ({exc}); the thread runs "
                 "on any CPU")
    if knobs.fifo_priority is not None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(knobs.fifo_priority))
            applied["sched"] = f"SCHED_FIFO priority {knobs.fifo_priority}"
        except (OSError, AttributeError) as exc:
            applied["refused"].append("sched")
            warn(f"rt.sched: the OS refused SCHED_FIFO priority {knobs.fifo_priority} for the "
                 f"{group} threads ({exc}; needs CAP_SYS_NICE or an rtprio limit); they keep "
                 "the default scheduler")
    if knobs.deadline is not None:
        refused = set_deadline(knobs.deadline)
        if refused is None:
            applied["sched"] = f"SCHED_DEADLINE {knobs.deadline.describe()}"
        else:
            applied["refused"].append("sched")
            warn(f"rt.sched: the OS refused SCHED_DEADLINE ({knobs.deadline.describe()}) for "
                 f"the {group} threads ({refused}); they keep the default scheduler")
    return applied


@contextmanager
def scheduler_thread_knobs(knobs: RtKnobs, warn, ledger=None):
    """SCHED_FIFO (``sched: fifo``) for the calling thread while the block runs, then its own
    policy back. The scheduler thread admits and dispatches every frame: at the default priority
    it waits behind the machine's other work while the stages it should start are ready (on a
    loaded machine, ms per frame). Only FIFO: a SCHED_DEADLINE reservation is sized for a
    stage's work, and affinity belongs to the groups; the caller's thread is left as it was."""
    if knobs.fifo_priority is None or not hasattr(os, "sched_getscheduler"):
        if ledger is not None:
            ledger.add("scheduler", {"cpus": None, "sched": None, "refused": []})
        yield
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    applied = apply_thread_knobs(RtKnobs(fifo_priority=knobs.fifo_priority), "scheduler", warn)
    if ledger is not None:
        ledger.add("scheduler", applied)
    try:
        yield
    finally:
        if (os.sched_getscheduler(0), os.sched_getparam(0)) != (policy, param):
            try:
                os.sched_setscheduler(0, policy, param)
            except OSError as exc:  # going back to SCHED_OTHER is always allowed; say if not
                warn(f"rt.sched: could not restore the calling thread's scheduler ({exc})")
