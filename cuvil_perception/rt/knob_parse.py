"""Strict parsing of the ``rt:`` knobs with numeric fields: SCHED_DEADLINE and cgroup placement.

``bad(field, message)`` (from `knobs.parse_knobs`) builds the PipelineError naming the file:line of
the ``rt:`` block and ``rt.<field>``. Times are milliseconds in YAML (like ``deadline_ms``
everywhere else) and integer ns / us for the kernel.
"""

from __future__ import annotations

import math
import re

from ..graph.op import suggest
from .cgroup import CgroupPlan
from .sched_deadline import MAX_PERIOD_NS, MIN_PERIOD_NS, MIN_RUNTIME_NS, DeadlineParams

CGROUP_KEYS = ("name", "cpu_max", "cpuset")
CPU_MAX_KEYS = ("quota_ms", "period_ms")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def positive_ms(value, field: str, bad) -> float:
    """A finite number > 0 (not a bool, not a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(field, f"must be a number of milliseconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise bad(field, f"must be a finite number > 0 ms, got {value!r}")
    return float(value)


def parse_deadline(sched: dict, bad) -> DeadlineParams:
    """``{policy: deadline, runtime_ms, deadline_ms[, period_ms]}`` with runtime <= deadline <=
    period and the kernel's limits (runtime >= 1.024 us, period 0.1 .. 4194.304 ms)."""
    for key in ("runtime_ms", "deadline_ms"):
        if key not in sched:
            raise bad(f"sched.{key}", "is required for policy deadline")
    runtime = positive_ms(sched["runtime_ms"], "sched.runtime_ms", bad)
    deadline = positive_ms(sched["deadline_ms"], "sched.deadline_ms", bad)
    period = positive_ms(sched.get("period_ms", deadline), "sched.period_ms", bad)
    if runtime > deadline:
        raise bad("sched.runtime_ms", f"runtime {runtime:g} ms exceeds deadline {deadline:g} ms "
                                      "(need runtime <= deadline <= period)")
    if deadline > period:
        raise bad("sched.deadline_ms", f"deadline {deadline:g} ms exceeds period {period:g} ms "
                                       "(need runtime <= deadline <= period)")
    ns = DeadlineParams(round(runtime * 1e6), round(deadline * 1e6), round(period * 1e6))
    if ns.runtime_ns < MIN_RUNTIME_NS:
        raise bad("sched.runtime_ms", f"must be at least {MIN_RUNTIME_NS / 1e6} ms (the "
                                      f"kernel's minimum), got {runtime:g}")
    if not MIN_PERIOD_NS <= ns.period_ns <= MAX_PERIOD_NS:
        raise bad("sched.period_ms", f"must be within {MIN_PERIOD_NS / 1e6:g} .. "
                                     f"{MAX_PERIOD_NS / 1e6:g} ms (the kernel's limits), got "
                                     f"{period:g}")
    return ns


def parse_cgroup(raw, bad) -> CgroupPlan:
    """``{name: cuvil, cpu_max: {quota_ms, period_ms} | max, cpuset: [ids]}``."""
    if not isinstance(raw, dict):
        raise bad("cgroup", "must be a mapping like {name: cuvil, cpu_max: {quota_ms: 50, "
                            "period_ms: 100}, cpuset: [1]}")
    for key in raw:
        if key not in CGROUP_KEYS:
            raise bad(f"cgroup.{key}", f"unknown field '{key}'{suggest(str(key), CGROUP_KEYS)}")
    name = raw.get("name", "cuvil")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise bad("cgroup.name", f"must be a cgroup directory name (letters, digits, _ . -), "
                                 f"got {name!r}")
    if "cpu_max" not in raw and "cpuset" not in raw:
        raise bad("cgroup", "give cpu_max and/or cpuset (nothing to place otherwise)")
    plan = CgroupPlan(name)
    if "cpu_max" in raw:
        plan = _cpu_max(raw["cpu_max"], plan, bad)
    if "cpuset" in raw:
        cpus = raw["cpuset"]
        if not isinstance(cpus, list) or not cpus or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 4096 for c in cpus):
            raise bad("cgroup.cpuset", f"must be a non-empty list of CPU ids, got {cpus!r}")
        plan = CgroupPlan(plan.name, plan.cpu_max, plan.unlimited, tuple(cpus))
    return plan


def _cpu_max(value, plan: CgroupPlan, bad) -> CgroupPlan:
    """cgroup v2 limits: period 1 ms .. 1 s, quota >= 1 ms (it may exceed the period: > 1 CPU)."""
    if value == "max":
        return CgroupPlan(plan.name, None, True, plan.cpuset)
    if not isinstance(value, dict):
        raise bad("cgroup.cpu_max", f"must be max or {{quota_ms, period_ms}}, got {value!r}")
    for key in value:
        if key not in CPU_MAX_KEYS:
            raise bad(f"cgroup.cpu_max.{key}",
                      f"unknown field '{key}'{suggest(str(key), CPU_MAX_KEYS)}")
    if "quota_ms" not in value:
        raise bad("cgroup.cpu_max.quota_ms", "is required")
    quota = positive_ms(value["quota_ms"], "cgroup.cpu_max.quota_ms", bad)
    period = positive_ms(value.get("period_ms", 100.0), "cgroup.cpu_max.period_ms", bad)
    if not 1.0 <= period <= 1000.0:
        raise bad("cgroup.cpu_max.period_ms", f"must be within 1 .. 1000 ms, got {period:g}")
    if not 1.0 <= quota <= 1e6:
        raise bad("cgroup.cpu_max.quota_ms", f"must be within 1 .. 1000000 ms, got {quota:g}")
    return CgroupPlan(plan.name, (round(quota * 1000), round(period * 1000)), False, plan.cpuset)
