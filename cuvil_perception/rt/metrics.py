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
    compiles_after_frame0                     must stay 0 (kernels are prewarmed)

The counts equal the run record's (``frames``, ``actions``, ``live_skipped``, timings per stage,
``compile.compiles_after_frame0``); tests/test_rt_metrics.py checks that on a replay.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)

from ..errors import UsageError
from .prewarm import compile_counters

#: histogram bucket bounds, seconds (100 us .. 2.5 s: kernels to a slow backbone)
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5)
DEFAULT_HOST = "127.0.0.1"


class _Histogram:
    """Cumulative buckets + sum per label tuple, fed with raw observations."""

    def __init__(self):
        self.series: dict[tuple, list] = {}

    def observe(self, labels: tuple, value_s: float) -> None:
        entry = self.series.setdefault(labels, [[0] * (len(BUCKETS) + 1), 0.0])
        slot = next((i for i, bound in enumerate(BUCKETS) if value_s <= bound), len(BUCKETS))
        entry[0][slot] += 1
        entry[1] += value_s

    def family(self, name: str, doc: str, label_names: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=label_names)
        for labels, (counts, total) in sorted(self.series.items()):
            cumulative, running = [], 0
            for bound, count in zip(BUCKETS + (float("inf"),), counts):
                running += count
                cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
            family.add_metric(list(labels), cumulative, total)
        return family


class RunMetrics:
    """A prometheus-client collector over one run's state; ``attach`` is the executor hook."""

    def __init__(self):
        self._lock = threading.Lock()
        self._run = None
        self._seen = {"timings": 0, "e2e": 0, "decisions": 0}
        self._stage = _Histogram()
        self._e2e = _Histogram()
        self._age = _Histogram()
        self._decisions: dict[tuple, int] = {}
        self._dropped: set[int] = set()  # frames with a "drop" decision (stage or e2e)

    def attach(self, scheduler, recorder, policy, counters: dict | None = None) -> None:
        """Called by ``run_pipeline`` once, after prewarm and before frame 0; ``counters`` is
        the compile-counter snapshot the run record counts "after frame 0" from."""
        with self._lock:
            self._run = (scheduler, recorder, policy)
            self._compiles0 = (counters or compile_counters())["compiles"]
            # live camera stamps are wall-clock ns: the offset maps the run clock onto them
            self._wall_offset = time.time_ns() - scheduler.clock.now_ns()

    def collect(self):
        with self._lock:
            if self._run is None:
                return
            scheduler, recorder, policy = self._run
            self._fold(scheduler, recorder, policy)
            yield from self._families(scheduler)

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
        yield GaugeMetricFamily("cuvil_compiles_after_frame0", "kernel compilations after "
                                "frame 0 (should be 0)",
                                value=compile_counters()["compiles"] - self._compiles0)


def parse_address(text: str) -> tuple[str, int]:
    """``"9100"`` -> (127.0.0.1, 9100); ``"0.0.0.0:9100"``; ``"[::1]:9100"``. Port 0 picks a free
    one. A malformed value is a UsageError naming --metrics."""
    host, port = DEFAULT_HOST, text.strip()
    if port.startswith("["):
        host, _, port = port[1:].partition("]")
        port = port.removeprefix(":") if port.startswith(":") else "?"
    elif ":" in port:
        host, _, port = port.rpartition(":")
    if not port.isdigit() or not host or int(port) > 65535:
        raise UsageError(f"--metrics {text!r}: expected [HOST:]PORT with PORT 0..65535 "
                         f"(HOST defaults to {DEFAULT_HOST})")
    return host, int(port)


class MetricsServer:
    """prometheus-client's HTTP server on ``address`` serving one `RunMetrics`."""

    def __init__(self, address: str):
        self.host, port = parse_address(address)
        self.metrics = RunMetrics()
        registry = CollectorRegistry()
        registry.register(self.metrics)
        try:
            self._server, self._thread = start_http_server(port, self.host, registry=registry)
        except OSError as exc:
            raise UsageError(f"--metrics {address}: cannot listen on {self.host}:{port} "
                             f"({exc.strerror or exc})") from None
        self.port = self._server.server_port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serve_for_run(address: str | None, options, note) -> Iterator[MetricsServer | None]:
    """``run --metrics``: serve while the block runs (``options.monitor`` set); ``note`` gets
    the URL. None: nothing is served."""
    if address is None:
        yield None
        return
    server = MetricsServer(address)
    options.monitor = server.metrics
    note(f"metrics at {server.url}")
    try:
        yield server
    finally:
        server.close()
