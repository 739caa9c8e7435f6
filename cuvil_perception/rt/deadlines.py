"""``deadline_ms: auto``: stage deadlines that fit the machine running the pipeline.

A deadline written in milliseconds was measured on someone's CPU; on a slower one every result
lands after it. ``auto`` measures it where the pipeline runs, before frame 0:

* measured: the executor asks each ``auto`` stage's op for ``TIMED_PASSES`` timed warm-up
  passes (after its untimed ones, ``ops.warmup``; the op declares ``measures_warmup``), on the
  run's clock, with the run's intra-op threads and under its SCHED_FIFO priority when it has
  one (``--rt-fifo``, ``rt.sched``: on a loaded machine the frames get a core, so the passes
  must too). The deadline is the slowest pass (the p99 of
  so few is their max) x ``MARGIN``, rounded up to ``STEP_MS``, and bounded by the frame budget
  ``e2e_deadline_ms`` (``rule_ms``, ``bounded``; the cache keeps the value before the bound).
  ``MARGIN`` covers what a warm-up pass in an otherwise idle process does not pay: the other
  detector computing on the next core (memory bandwidth, L3), the sinks and the rest of the
  machine. Then kept in the per-machine cache (``deadline_cache``).
* cache: a value kept for this machine (CPU fingerprint, ONNX Runtime version, pipeline hash,
  intra-op threads) by an earlier run or by ``rt calibrate``; the run then times no extra
  passes. ``rt calibrate`` measures on replayed frames instead (the p99 of their stage times x
  ``MARGIN``) and overwrites the entry; it is how a deadline is re-measured after the machine
  changed.
* explicit: ``deadline_ms: <ms>`` is used as written and never measured.

Every run records each stage deadline it used and how it was obtained (the record's
``deadlines``; ``run`` prints them in its placement lines). Deadlines only shape decisions:
a ``rate 0`` replay (not enforced) stays a pure function of the drive, and a ``--decisions``
replay re-applies the recorded decisions whatever the deadlines resolve to here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

from ..errors import ExecutionError
from . import deadline_cache

TIMED_PASSES = 8  # timed warm-up passes per auto stage (~0.6 s for a 70 ms network)
MARGIN = 1.5  # x the slowest timed pass: see the module docstring
STEP_MS = 5.0  # deadlines are rounded up to this many ms


@dataclass(frozen=True)
class Deadline:
    """The deadline a run uses for one stage. ``source``: "explicit", "measured" (this run's
    warm-up) or "cache"; ``passes_ms``: what an auto value was computed from; ``capped``: bounded
    by ``e2e_deadline_ms``; ``origin``: how a cached value was measured (``deadline_cache``)."""

    stage: str
    ms: float
    source: str
    passes_ms: tuple[float, ...] = ()
    capped: bool = False
    origin: str | None = None
    rule: str = ""

    def as_dict(self) -> dict:
        """The record's ``deadlines`` entry (without the stage id, its key)."""
        entry = {"ms": self.ms, "source": self.source}
        if self.source != "explicit":
            entry.update(passes_ms=list(self.passes_ms), rule=self.rule, capped=self.capped,
                         origin=self.origin)
        return entry

    def describe(self) -> str:
        """``deadline 70 ms (auto, measured now: ...)`` for the placement lines."""
        if self.source == "explicit":
            return f"deadline {self.ms:g} ms"
        where = {"measured": "measured now", "cache": f"from cache ({self.origin})"}[self.source]
        return f"deadline {self.ms:g} ms (auto, {where}: {self.rule})"


def rule_ms(passes_ms) -> tuple[float, str]:
    """(deadline ms, the rule in words) from timed passes (ms), before the e2e bound."""
    slowest = max(passes_ms)
    ms = max(STEP_MS, math.ceil(slowest * MARGIN / STEP_MS - 1e-9) * STEP_MS)
    return float(ms), f"max {slowest:.1f} ms of {len(passes_ms)} passes x {MARGIN:g}"


def bounded(ms: float, rule: str, e2e_deadline_ms: float | None) -> tuple[float, bool, str]:
    """(ms, capped, rule) with the frame budget as the upper bound."""
    if e2e_deadline_ms is not None and ms > e2e_deadline_ms:
        return float(e2e_deadline_ms), True, f"{rule}, capped at e2e {e2e_deadline_ms:g} ms"
    return ms, False, rule


class AutoDeadlines:
    """One run's auto deadlines: which stages need timed warm-up passes (``timed_passes``), then
    the deadlines from those passes or the cache (``resolve``).

    ``intra_op_threads``: the networks' threads this run (part of the cache key);
    ``use_cache``: read and fill the per-machine cache (``rt calibrate`` measures without it).
    """

    def __init__(self, pipeline, intra_op_threads: int, use_cache: bool = True):
        self.pipeline = pipeline
        self.auto = [s.id for s in pipeline.ordered() if s.auto_deadline]
        self.use_cache = use_cache and bool(self.auto)
        self.key = deadline_cache.key_fields(pipeline, intra_op_threads) if self.auto else None
        self.cached = deadline_cache.load(self.key) if self.use_cache else {}

    def timed_passes(self) -> dict[str, int]:
        """``{stage id: passes}`` for the auto stages without a cached value."""
        return {sid: TIMED_PASSES for sid in self.auto if sid not in self.cached}

    def resolve(self, instances, warn=None) -> dict[str, Deadline]:
        """Every stage deadline of the run; measured ones are stored in the cache."""
        e2e = self.pipeline.e2e_deadline_ms
        found, measured = {}, {}
        for stage in self.pipeline.ordered():
            if stage.deadline_ms is None:
                continue
            if not stage.auto_deadline:
                found[stage.id] = Deadline(stage.id, float(stage.deadline_ms), "explicit")
                continue
            cached = self.cached.get(stage.id)
            if cached is not None:
                passes = tuple(cached.get("passes_ms") or ())
                rule = str(cached.get("rule") or f"{cached['ms']:g} ms")
                ms, capped, rule = bounded(float(cached["ms"]), rule, e2e)
                found[stage.id] = Deadline(stage.id, ms, "cache", passes, capped,
                                           cached["origin"], rule)
                continue
            passes = tuple(ns / 1e6 for ns in instances[stage.id]["normal"].warmup_ns)
            if not passes:
                raise ExecutionError(f"stage '{stage.id}': op '{stage.op}' declares "
                                     "measures_warmup but its open() timed no warm-up pass")
            ms, rule = rule_ms(passes)
            measured[stage.id] = {"ms": ms, "passes_ms": [round(p, 4) for p in passes],
                                  "origin": "warm-up", "rule": rule}
            ms, capped, rule = bounded(ms, rule, e2e)
            found[stage.id] = Deadline(stage.id, ms, "measured", passes, capped, "warm-up", rule)
        if measured and self.use_cache:
            deadline_cache.store(self.key, measured, warn)
        return found


def with_deadlines(pipeline, deadlines: dict[str, Deadline]):
    """A shallow copy of the validated ``pipeline`` whose auto stages carry their resolved ms
    (what the policy, admission and latency report of the run read); the caller's pipeline
    keeps ``auto``."""
    resolved = copy.copy(pipeline)
    resolved.stages = [replace(s, deadline_ms=deadlines[s.id].ms) if s.auto_deadline else s
                       for s in pipeline.stages]
    return resolved


def run_stages(pipeline, result) -> list:
    """``pipeline``'s stages in order with the deadlines a finished run used
    (``RunResult.deadlines``): what a report over that run's timings counts misses against."""
    ms = {sid: entry["ms"] for sid, entry in (getattr(result, "deadlines", None) or {}).items()}
    return [replace(s, deadline_ms=ms[s.id]) if s.auto_deadline and s.id in ms else s
            for s in pipeline.ordered()]
