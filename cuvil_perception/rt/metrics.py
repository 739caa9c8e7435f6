"""Live Prometheus metrics of a run (``run --metrics [HOST:]PORT``), from the run's own records.

Nothing here times anything: a scrape reads what the executor already keeps - the latency
recorder's timings and end-to-end entries, the deadline policy's decision log, the scheduler's
frame counters and queues, the compile counters - and folds the entries added since the last
scrape into histograms. The HTTP server (prometheus-client's, on its own daemon thread) is on
the io side; a scrape reads only the records added since the last one (one short read of the
recorder's spool under its lock, ``qsize()`` of the queues), so a compute thread appending a
timing waits microseconds at most. Exposed (all names prefixed ``cuvil_``)::

    stage_latency_seconds{stage,variant}      histogram of process() wall time per stage
    e2e_latency_seconds                       histogram, frame release -> last stage done
    frame_sensor_age_seconds                  histogram: age of each frame's sensor data when
                                              its last stage finished (live: wall clock minus
                                              the camera stamp; paced replay: run time minus
                                              the replayed sensor time; rate 0: = e2e)
    deadline_decisions_total{stage,kind,policy}   every decision of the run record (stage
                                              "e2e" for end-to-end ones; policy: the action,
                                              keep_late for a late result kept)
    frames_in_total / frames_out_total        frames admitted / through the whole pipeline
    frames_dropped_total{reason}              live_skip (the source kept a newer frame),
                                              deadline_drop (frames with a drop decision;
                                              a keep_late frame is not dropped)
    queue_depth{queue}                        source read-ahead queues, in_flight frames
    compiles_after_frame0_total               counter; must stay 0 (kernels are prewarmed)
    run_state{pipeline,state}                 1 for the run's state, 0 for the others:
                                              starting (prewarm, warm-up passes), running,
                                              finished (the last frame is out; the endpoint
                                              lingers so the final counts get scraped)
    build_info{version,pipeline,cpu,isa}      always 1; join on it to label other series

Before frame 0 a scrape already answers: run_state, build_info and the process metrics
(``process_*`` from prometheus-client's ProcessCollector - CPU seconds, resident memory, open
fds, start time - and ``python_info``), never an empty body. Latency buckets run 100 us .. the
first 1-2.5-5 bound at or above max(10 s, 10 x the pipeline's ``e2e_deadline_ms``), so a median
far past the budget still lands in a finite bucket.

The counts equal the run record's (``frames``, ``actions``, ``live_skipped``, timings per stage,
``compile.compiles_after_frame0``); tests/test_rt_metrics.py checks that on a replay.
"""

from __future__ import annotations

import threading
import time

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)

from .. import __version__
from ..machine_info import cpu
from .op_prewarm import compile_counters

RUN_STATES = ("starting", "running", "finished")
#: the top bucket is at least this, seconds, whatever the e2e budget
MIN_TOP_BUCKET_S = 10.0


def latency_buckets(e2e_budget_ms: float | None) -> tuple[float, ...]:
    """Bucket bounds in seconds: 1, 2.5, 5 per decade from 100 us up to the first bound at or
    above max(10 s, 10 x ``e2e_budget_ms``) (None: no e2e budget)."""
    top = max(MIN_TOP_BUCKET_S, 10 * (e2e_budget_ms or 0) / 1e3)
    bounds, decade = [], 1e-4
    while not bounds or bounds[-1] < top:
        bounds.extend(round(decade * step, 12) for step in (1, 2.5, 5))
        decade *= 10
    return tuple(b for i, b in enumerate(bounds) if i == 0 or bounds[i - 1] < top)


class _Histogram:
    """Cumulative buckets + sum per label tuple, fed with raw observations (seconds)."""

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.series: dict[tuple, list] = {}

    def observe(self, labels: tuple, value_s: float) -> None:
        entry = self.series.setdefault(labels, [[0] * (len(self.buckets) + 1), 0.0])
        slot = next((i for i, bound in enumerate(self.buckets) if value_s <= bound),
                    len(self.buckets))
        entry[0][slot] += 1
        entry[1] += value_s

    def family(self, name: str, doc: str, label_names: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=label_names)
        for labels, (counts, total) in sorted(self.series.items()):
            cumulative, running = [], 0
            for bound, count in zip(self.buckets + (float("inf"),), counts):
                running += count
                cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
            family.add_metric(list(labels), cumulative, total)
        return family


class RunMetrics:
    """A prometheus-client collector over one run's state, from the first scrape on:
    ``attach`` (the executor hook, before frame 0) and ``finish`` (the caller, after the last
    frame) move the run through `RUN_STATES`. ``pipeline``: the name build_info and run_state
    carry (attach fills it in when empty)."""

    def __init__(self, pipeline: str = ""):
        self._lock = threading.Lock()
        self._run = None
        self.pipeline = pipeline
        self.state = "starting"
        self._seen = {"timings": 0, "e2e": 0, "decisions": 0}
        self._decisions: dict[tuple, int] = {}
        self._dropped: set[int] = set()  # frames with a "drop" decision (stage or e2e)

    def attach(self, scheduler, recorder, policy, counters: dict | None = None) -> None:
        """Called by ``run_pipeline`` once, after prewarm and before frame 0; ``counters`` is
        the compile-counter snapshot the run record counts "after frame 0" from."""
        pipeline = scheduler.state.pipeline
        buckets = latency_buckets(pipeline.e2e_deadline_ms)
        with self._lock:
            self.pipeline = self.pipeline or pipeline.name
            self._stage, self._e2e, self._age = (_Histogram(buckets) for _ in range(3))
            self._run = (scheduler, recorder, policy)
            self._compiles0 = (counters or compile_counters())["compiles"]
            # live camera stamps are wall-clock ns: the offset maps the run clock onto them
            self._wall_offset = time.time_ns() - scheduler.clock.now_ns()
            self.state = "running"

    def finish(self) -> None:
        """The last frame is out: scrapes from now on say ``finished`` (counts stay final)."""
        with self._lock:
            self.state = "finished"

    def collect(self):
        with self._lock:
            yield from self._identity()
            if self._run is None:
                return
            scheduler, recorder, policy = self._run
            self._fold(scheduler, recorder, policy)
            yield from self._families(scheduler)

    def _identity(self):
        """run_state and build_info: what even a scrape during prewarm gets."""
        state = GaugeMetricFamily("cuvil_run_state", "1 for the run's current state (starting: "
                                  "prewarm and warm-up; running; finished: last frame out)",
                                  labels=["pipeline", "state"])
        for name in RUN_STATES:
            state.add_metric([self.pipeline, name], 1 if name == self.state else 0)
        yield state
        host = cpu()
        info = GaugeMetricFamily("cuvil_build_info", "cuvil-perception version, pipeline and "
                                 "CPU (always 1)", labels=["version", "pipeline", "cpu", "isa"])
        info.add_metric([__version__, self.pipeline, host.model, host.isa], 1)
        yield info

    def _fold(self, scheduler, recorder, policy) -> None:
        """Feed the entries added since the last scrape (slices of append-only lists)."""
        timings = recorder.timings[self._seen["timings"]:]
        self._seen["timings"] += len(timings)
        for t in timings:
            self._stage.observe((t["stage"], t["variant"]), (t["end_ns"] - t["start_ns"]) / 1e9)
        ends = recorder.e2e[self._seen["e2e"]:]
        self._seen["e2e"] += len(ends)
        for e in ends:
            self._e2e.observe((), (e["end_ns"] - e["start_ns"]) / 1e9)
            self._age.observe((), self._sensor_age_s(scheduler, e))
        decisions = policy.decisions[self._seen["decisions"]:]
        self._seen["decisions"] += len(decisions)
        for d in decisions:
            key = (d.get("stage") or "e2e", d["kind"], d["action"])
            self._decisions[key] = self._decisions.get(key, 0) + 1
            if d["action"] == "drop":
                self._dropped.add(d["frame"])

    def _sensor_age_s(self, scheduler, entry: dict) -> float:
        sensor = entry.get("sensor_ns")
        options = scheduler.options
        if sensor is None:
            return (entry["end_ns"] - entry["start_ns"]) / 1e9
        if options.live:
            return (entry["end_ns"] + self._wall_offset - sensor) / 1e9
        if options.rate > 0 and scheduler.ts0_ns is not None:
            replayed = scheduler.pace0_ns + (sensor - scheduler.ts0_ns) / options.rate
            return (entry["end_ns"] - replayed) / 1e9
        return (entry["end_ns"] - entry["start_ns"]) / 1e9

    def _families(self, scheduler):
        yield self._stage.family("cuvil_stage_latency_seconds",
                                 "process() wall time per stage", ["stage", "variant"])
        yield self._e2e.family("cuvil_e2e_latency_seconds", "frame release to last stage", [])
        yield self._age.family("cuvil_frame_sensor_age_seconds",
                               "age of a frame's sensor data when its last stage finished", [])
        decisions = CounterMetricFamily("cuvil_deadline_decisions", "deadline decisions",
                                        labels=["stage", "kind", "policy"])
        for labels, count in sorted(self._decisions.items()):
            decisions.add_metric(list(labels), count)
        yield decisions
        yield CounterMetricFamily("cuvil_frames_in", "frames admitted", value=scheduler.admitted)
        yield CounterMetricFamily("cuvil_frames_out", "frames through the whole pipeline",
                                  value=scheduler.state.frames)
        dropped = CounterMetricFamily("cuvil_frames_dropped", "frames dropped",
                                      labels=["reason"])
        readers = getattr(scheduler, "readers", {})
        dropped.add_metric(["live_skip"], sum(r.skipped for r in readers.values()))
        dropped.add_metric(["deadline_drop"], len(self._dropped))
        yield dropped
        depth = GaugeMetricFamily("cuvil_queue_depth", "items waiting", labels=["queue"])
        for stage_id, reader in sorted(readers.items()):
            depth.add_metric([f"source:{stage_id}"], reader.queue.qsize())
        depth.add_metric(["in_flight"], len(scheduler.frames))
        yield depth
        yield CounterMetricFamily("cuvil_compiles_after_frame0", "kernel compilations after "
                                  "frame 0 (should stay 0)",
                                  value=compile_counters()["compiles"] - self._compiles0)
