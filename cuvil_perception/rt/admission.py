"""Overload shedding at admission: skip a frame before any work when it cannot make its deadline.

Without it, an overloaded real-time run admits every frame, queues it behind the frames still in
flight, computes it late and only then drops it: every core is spent on frames nobody will use.
``AdmissionControl`` is asked once per frame, when the frame is due (its paced arrival time in a
replay, its read time live), before any stage runs:

* measured costs: a sliding window of the last ``WINDOW`` wall times of each stage (per variant),
  fed by the scheduler as results settle; a stage's predicted cost is the ``QUANTILE`` of its
  window (0 before its first measurement, so the first frames are always admitted).
* prediction: the frames in flight are played forward through the stages with those costs, and
  the new frame after them, the way the scheduler runs them: a stage runs its frames in order,
  one at a time; a frame's stage is ready when the stage is free and its inputs are done; an
  ``io`` stage starts when ready (it has its own thread), a ``compute`` stage when ready *and* one
  of the pool's ``workers`` threads is free (ready stages take free threads in the order they
  became ready). Two detectors side by side take max(a, b) on two workers but a + b on one, and
  a frame's detectors wait while the previous frame's sink holds a worker. The predicted
  end-to-end time is the end of the new frame's last stage minus its arrival time.
* budget: the pipeline's ``e2e_deadline_ms``; without one, the sum of the stage deadlines along
  the longest path (a stage without a deadline contributes its predicted cost). ``deadline_ms:
  auto`` stages count with the ms they resolved to before frame 0 (``rt.deadlines``), and their
  timed warm-up passes are the first costs in their windows, so frame 0 is predicted too.
  The same costs predict, for a late stage result, whether its frame can still make the budget
  (``downstream_ns``; ``policy`` keeps such results instead of dropping them). A pipeline with
  no deadline at all has no budget and sheds nothing.
* decision: skip when the prediction exceeds the budget although the frame alone (the stage
  costs along the longest path, as if the pipeline had been free when it arrived) fits in it —
  the frame is late because of the work ahead of it, which shedding it removes. A pipeline too
  slow for its budget even when free sheds a frame only while others are in flight, so it
  keeps running frames (and measuring costs) instead of starving. The next frame is considered
  when it arrives, so the newest frame wins, as with a depth-1 sensor queue.

Each skip is a decision ``{"frame", "stage": None, "kind": "admission_skip", "action": "skip",
"predicted_ms", "deadline_ms"}`` in the run record. Replaying with ``--decisions`` skips exactly
the recorded frames (and nothing is predicted), which reproduces the run's outputs. Admission
control acts only when deadlines are enforced on a real-time run (``rate > 0`` or live input);
``--no-shed`` turns it off.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

WINDOW = 20
QUANTILE = 90.0
KIND = "admission_skip"


class AdmissionControl:
    """Cost estimates and the admit/skip decision for one run.

    ``stages``: the worker stages (not sources) in topological order; ``e2e_deadline_ms``: the
    pipeline's (None: derived from the stage deadlines); ``active``: predict and skip; ``recorded``:
    frame indices to skip verbatim (a ``--decisions`` replay; overrides ``active``); ``workers``:
    threads of the compute pool (None: as many as there are compute stages).
    """

    def __init__(self, stages, e2e_deadline_ms: float | None, active: bool,
                 recorded: set[int] | None = None, workers: int | None = None):
        self.stages = list(stages)
        self.compute = {s.id for s in self.stages if s.effective_tag != "io"}
        self.workers = max(1, workers if workers is not None else len(self.compute))
        self.ids = {s.id for s in self.stages}
        self.upstream = {s.id: [ref.stage for ref in s.inputs.values() if ref.stage in self.ids]
                         for s in self.stages}
        self.active = active
        self.recorded = recorded
        self.e2e_deadline_ms = e2e_deadline_ms
        self._costs: dict[tuple[str, str], deque] = {}

    @property
    def enabled(self) -> bool:
        return self.recorded is not None or self.active

    def observe(self, stage_id: str, variant: str, elapsed_ns: int) -> None:
        """One measured wall time of a worker stage (sources and reference timings are not)."""
        if stage_id in self.ids and variant in ("normal", "degraded"):
            self._costs.setdefault((stage_id, variant), deque(maxlen=WINDOW)).append(elapsed_ns)

    def cost_ns(self, stage_id: str, variant: str = "normal") -> int:
        """Predicted wall time (ns) of one run of the stage; 0 before it was measured."""
        window = self._costs.get((stage_id, variant)) or self._costs.get((stage_id, "normal"))
        if not window:
            return 0
        return int(np.percentile(np.fromiter(window, np.int64), QUANTILE))

    def budget_ms(self) -> float | None:
        """The end-to-end budget of a frame (ms), None without any deadline: see the module
        docstring."""
        if self.e2e_deadline_ms is not None:
            return float(self.e2e_deadline_ms)
        if all(stage.deadline_ms is None for stage in self.stages):
            return None
        path: dict[str, float] = {}
        for stage in self.stages:
            own = stage.deadline_ms if stage.deadline_ms is not None \
                else self.cost_ns(stage.id) / 1e6
            before = [path[ref.stage] for ref in stage.inputs.values() if ref.stage in path]
            path[stage.id] = own + max(before, default=0.0)
        return max(path.values(), default=0.0)

    def downstream_ns(self, stage_id: str, frame: int, variant_of, stop) -> int:
        """Predicted cost (ns) of the longest chain of stages fed by ``stage_id``'s result, up to
        and not including the ``stop`` stages (the sinks): what a late result's frame still has
        to run before its e2e check (``policy``). Stages on other branches are not waited for."""
        after = {stage_id: 0}
        for stage in self.stages:  # topological order
            before = [after[up] for up in self.upstream[stage.id] if up in after]
            if stage.id != stage_id and before and stage.id not in stop:
                after[stage.id] = max(before) + self.cost_ns(stage.id, variant_of(stage.id, frame))
        return max(after.values())

    def decide(self, index: int, arrival_ns: int, now_ns: int, in_flight, busy,
               variant_of) -> dict | None:
        """A skip decision for frame ``index`` (None: admit it).

        ``in_flight``: ``[(frame index, {stage id: done?})]`` oldest first; ``busy``: ``{stage id:
        (frame index, start_ns)}``; ``variant_of(stage_id, frame)`` -> "normal" | "degraded".
        """
        if self.recorded is not None:
            if index not in self.recorded:
                return None
            return {"frame": index, "stage": None, "kind": KIND, "action": "skip",
                    "predicted_ms": None, "deadline_ms": None, "variant": None,
                    "replayed": True}
        budget = self.budget_ms()
        if not self.active or budget is None:
            return None
        finish = self.predict_finish_ns(now_ns, in_flight, busy, variant_of, index)
        predicted_ms = (finish - arrival_ns) / 1e6
        alone_ms = (self.predict_finish_ns(arrival_ns, [], {}, variant_of, index)
                    - arrival_ns) / 1e6
        if predicted_ms <= budget or (alone_ms > budget and not in_flight):
            return None
        return {"frame": index, "stage": None, "kind": KIND, "action": "skip",
                "predicted_ms": round(predicted_ms, 4), "deadline_ms": round(budget, 4),
                "variant": None}

    def predict_finish_ns(self, now_ns: int, in_flight, busy, variant_of, index: int) -> int:
        """When frame ``index`` would finish if admitted now, behind the frames in flight."""
        frames = list(in_flight) + [(index, {})]
        ends: dict[tuple[int, str], int] = {}  # (frame position, stage id) -> predicted end
        memo: dict[tuple[str, str], int] = {}

        def cost(sid: str, frame: int) -> int:
            # a stage not measured yet costs at least what its running call has taken so far
            key = (sid, variant_of(sid, frame))
            if key not in memo:
                memo[key] = self.cost_ns(*key) or (now_ns - busy[sid][1] if sid in busy else 0)
            return memo[key]

        free, pool = self._running(now_ns, busy, cost)
        todo = {s.id: 0 for s in self.stages}  # stage id -> position of its next frame
        while True:
            best = None
            for order, stage in enumerate(self.stages):
                pos = self._next(stage.id, todo, frames, ends, now_ns, busy, free)
                if pos is None:
                    continue
                ready = max([free.get(stage.id, now_ns)] +
                            [ends[(pos, up)] for up in self.upstream[stage.id]])
                start = max(ready, pool[0]) if stage.id in self.compute else ready
                key = (start, ready, pos, order)
                if best is None or key < best[0]:
                    best = (key, stage.id, pos)
            if best is None:
                break
            (start, _, pos, _), sid, _ = best
            end = start + cost(sid, frames[pos][0])
            ends[(pos, sid)] = free[sid] = end
            todo[sid] = pos + 1
            if sid in self.compute:
                heapq.heapreplace(pool, end)
        last = len(frames) - 1
        return max([now_ns] + [end for (pos, _), end in ends.items() if pos == last])

    def _running(self, now_ns: int, busy, cost) -> tuple[dict, list]:
        """(stage id -> when its running call ends, the pool threads' free times as a heap).
        Compute calls took threads in the order they were submitted (the pool is a FIFO)."""
        pool = [now_ns - (1 << 62)] * self.workers
        free = {}
        for sid, (frame, start) in sorted(busy.items(), key=lambda item: item[1][1]):
            if sid in self.compute:
                start = max(start, heapq.heappop(pool))
            free[sid] = max(now_ns, start + cost(sid, frame))
            if sid in self.compute:
                heapq.heappush(pool, free[sid])
        return free, [max(t, now_ns) for t in sorted(pool)]

    def _next(self, sid: str, todo: dict, frames: list, ends: dict, now_ns: int, busy,
              free) -> int | None:
        """Position of the next frame ``sid`` must still run whose inputs are all predicted
        (frames it has done or is running are settled here), None when there is none yet."""
        while todo[sid] < len(frames):
            pos = todo[sid]
            frame, done = frames[pos]
            if done.get(sid):
                ends[(pos, sid)] = now_ns
            elif sid in busy and busy[sid][0] == frame:
                ends[(pos, sid)] = free[sid]
            else:
                return pos if all((pos, up) in ends for up in self.upstream[sid]) else None
            todo[sid] = pos + 1
        return None
