"""``run --otlp ENDPOINT``: the run's stage spans and metrics over OTLP/HTTP (protobuf).

What is sent (resource ``service.name = cuvil-perception``, ``service.version``, the pipeline
name and the CPU model + ISA):

- **Traces:** one trace per finished frame: a root span ``frame`` from its first stage's start
  (a source's read, before the frame's release) to its last stage's end, with the e2e latency
  (release to last stage) as ``cuvil.e2e_ns``, and under it one span per stage execution, named like the
  Perfetto trace's events (``rt.trace``: the stage id, ``stage@variant`` for side variants),
  with the same start and end (the run clock mapped onto the epoch once, at attach) and the
  attributes ``cuvil.frame``, ``cuvil.op``, ``cuvil.variant``, ``cuvil.outcome``,
  ``thread.id`` and ``thread.name``. Stage executions of a frame that never finished (stopped
  run) are sent at ``finish`` as root spans of their own.
- **Metrics:** histograms ``cuvil.stage.duration`` (s; stage, variant) and
  ``cuvil.e2e.duration`` (s), counters ``cuvil.frames.out`` and ``cuvil.deadline.decisions``
  (stage, kind, policy) — the same quantities as the Prometheus endpoint (``rt.metrics``).

A background thread folds what the recorder gained every ``interval_s`` (as a Prometheus
scrape does) and hands it to the SDK's batch span processor and periodic metric reader;
``finish`` folds the rest and flushes. Nothing waits on the network on a frame's path. A
collector that is down costs spans, never the run: the first failed export prints one
warning naming the endpoint.

Needs the ``otlp`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``).
"""

from __future__ import annotations

import logging
import threading
import time
from urllib.parse import urlsplit

from .. import __version__
from ..errors import UsageError
from ..machine_info import cpu
from .metrics import latency_buckets
from .stats import timing_key

#: the OTLP/HTTP paths appended to ``--otlp``'s base URL (the OTLP spec's defaults)
TRACES_PATH, METRICS_PATH = "/v1/traces", "/v1/metrics"
DEFAULT_INTERVAL_S = 1.0
#: one export's budget, retries included (the SDK's default is 10 s): a collector that is down
#: must not hold the end of a run for tens of seconds
EXPORT_TIMEOUT_S = 2.0
MAX_ENDPOINT_CHARS = 2048


def parse_endpoint(text: str) -> str:
    """``http://HOST:PORT`` (or https, with an optional path prefix) -> the base URL without a
    trailing slash. Anything else is a UsageError naming --otlp and the expected form."""
    form = "expected http://HOST:PORT or https://HOST[:PORT][/PREFIX] (OTLP/HTTP, e.g. " \
           "http://127.0.0.1:4318)"
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_ENDPOINT_CHARS:
        raise UsageError(f"--otlp {str(text)[:80]!r}: {form}")
    parts = urlsplit(text.strip())
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"--otlp {text!r}: the port is not 0..65535; {form}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or port == 0:
        raise UsageError(f"--otlp {text!r}: {form}")
    return text.strip().rstrip("/")


def _sdk():
    """The OpenTelemetry SDK modules, or a UsageError saying which extra installs them."""
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk import metrics as sdk_metrics
        from opentelemetry.sdk import resources, trace as sdk_trace
        from opentelemetry.sdk.metrics import export as metric_export
        from opentelemetry.sdk.trace import export as trace_export
    except ImportError as exc:
        raise UsageError(f"--otlp needs the OpenTelemetry packages ({exc.name} is missing): "
                         "pip install 'cuvil-perception[otlp]'") from None
    return (OTLPSpanExporter, OTLPMetricExporter, sdk_trace, trace_export, sdk_metrics,
            metric_export, resources)


class _Warned:
    """Wraps an OTLP exporter: the first failed export prints one warning, later ones none."""

    def __init__(self, exporter, what: str, endpoint: str, warn):
        self._exporter, self._what, self._endpoint, self._warn = exporter, what, endpoint, warn
        self._said = False

    def __getattr__(self, name):
        return getattr(self._exporter, name)

    def export(self, batch, *args, **kwargs):
        result = self._exporter.export(batch, *args, **kwargs)
        if getattr(result, "name", "") == "FAILURE" and not self._said:
            self._said = True
            self._warn(f"--otlp {self._endpoint}: exporting {self._what} failed (is a collector "
                       "listening there?); the run goes on, those are lost")
        return result


class _QuietSdkLogs:
    """While the export lives, the SDK's own log lines (a retry per export, per signal, with
    the connection's repr) stay out of the terminal: `_Warned` says it once, in our words."""

    NAMES = ("opentelemetry.exporter", "opentelemetry.sdk")

    def __enter__(self):
        self._levels = {name: logging.getLogger(name).level for name in self.NAMES}
        for name in self.NAMES:
            logging.getLogger(name).setLevel(logging.CRITICAL)

    def __exit__(self, *exc):
        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)


class OtlpExport:
    """A run monitor (``RunOptions.monitors``): ``attach`` before frame 0 starts the folding
    thread, ``finish`` after the last frame sends the rest and shuts the exporters down."""

    def __init__(self, endpoint: str, pipeline: str = "", warn=None,
                 interval_s: float = DEFAULT_INTERVAL_S):
        self.endpoint = parse_endpoint(endpoint)
        self.pipeline, self.interval_s = pipeline, interval_s
        self._warn = warn or (lambda message: None)
        self._sdk = _sdk()
        self._run = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = {"timings": 0, "e2e": 0, "decisions": 0}
        self._pending: dict[int, list[dict]] = {}  # frame -> its stage timings, until its e2e
        self._quiet = _QuietSdkLogs()

    # -- the monitor hooks ---------------------------------------------------------------
    def attach(self, scheduler, recorder, policy, counters=None) -> None:
        pipeline = scheduler.state.pipeline
        self.pipeline = self.pipeline or pipeline.name
        self._stage_ops = {s.id: s.op for s in pipeline.ordered()}
        # the run clock is monotonic: one offset maps it onto the epoch OTLP wants
        self._wall_offset = time.time_ns() - scheduler.clock.now_ns()
        self._providers(latency_buckets(pipeline.e2e_deadline_ms))
        self._run = (recorder, policy)
        self._quiet.__enter__()
        self._thread = threading.Thread(target=self._loop, name="cuvil-otlp", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        if self._run is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._fold(final=True)
        self._tracing.force_flush()
        self._metering.force_flush()
        self._tracing.shutdown()
        self._metering.shutdown()
        self._quiet.__exit__()
        self._run = None

    # -- set-up ------------------------------------------------------------------------------
    def _providers(self, buckets_s: tuple[float, ...]) -> None:
        (span_exporter, metric_exporter, sdk_trace, trace_export, sdk_metrics, metric_export,
         resources) = self._sdk
        host = cpu()
        resource = resources.Resource.create({
            "service.name": "cuvil-perception", "service.version": __version__,
            "cuvil.pipeline": self.pipeline, "host.cpu.model.name": host.model,
            "cuvil.cpu.isa": host.isa})
        spans = _Warned(span_exporter(endpoint=self.endpoint + TRACES_PATH,
                                      timeout=EXPORT_TIMEOUT_S), "spans",
                        self.endpoint, self._warn)
        self._tracing = sdk_trace.TracerProvider(resource=resource)
        self._tracing.add_span_processor(trace_export.BatchSpanProcessor(spans))
        self._tracer = self._tracing.get_tracer("cuvil_perception.rt", __version__)
        metrics = _Warned(metric_exporter(endpoint=self.endpoint + METRICS_PATH,
                                          timeout=EXPORT_TIMEOUT_S), "metrics",
                          self.endpoint, self._warn)
        reader = metric_export.PeriodicExportingMetricReader(
            metrics, export_interval_millis=max(1000.0, self.interval_s * 1000.0))
        view = sdk_metrics.view.View(
            instrument_name="cuvil.*.duration",
            aggregation=sdk_metrics.view.ExplicitBucketHistogramAggregation(list(buckets_s)))
        self._metering = sdk_metrics.MeterProvider(metric_readers=[reader], resource=resource,
                                                   views=[view])
        meter = self._metering.get_meter("cuvil_perception.rt", __version__)
        self._stage_hist = meter.create_histogram(
            "cuvil.stage.duration", unit="s", description="process() wall time per stage")
        self._e2e_hist = meter.create_histogram(
            "cuvil.e2e.duration", unit="s", description="frame release to last stage")
        self._frames_out = meter.create_counter(
            "cuvil.frames.out", description="frames through the whole pipeline")
        self._decisions = meter.create_counter(
            "cuvil.deadline.decisions", description="deadline decisions")

    # -- folding -----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._fold(final=False)

    def _fold(self, final: bool) -> None:
        """Send what the recorder and the policy gained since the last fold (append-only
        lists: slices past what was seen). One thread at a time (the lock)."""
        with self._lock:
            recorder, policy = self._run
            timings = recorder.timings[self._seen["timings"]:]
            self._seen["timings"] += len(timings)
            for timing in timings:
                self._stage_hist.record((timing["end_ns"] - timing["start_ns"]) / 1e9,
                                        {"stage": timing["stage"],
                                         "variant": timing["variant"]})
                self._pending.setdefault(timing["frame"], []).append(timing)
            ends = recorder.e2e[self._seen["e2e"]:]
            self._seen["e2e"] += len(ends)
            for entry in ends:
                self._e2e_hist.record((entry["end_ns"] - entry["start_ns"]) / 1e9)
                self._frames_out.add(1)
                self._frame_trace(entry, self._pending.pop(entry["frame"], []))
            decisions = policy.decisions[self._seen["decisions"]:]
            self._seen["decisions"] += len(decisions)
            for d in decisions:
                self._decisions.add(1, {"stage": d.get("stage") or "e2e", "kind": d["kind"],
                                        "policy": d["action"]})
            if final:  # frames that never finished: their stages alone
                for frame in sorted(self._pending):
                    for timing in self._pending[frame]:
                        self._stage_span(timing, None)
                self._pending.clear()

    def _frame_trace(self, entry: dict, timings: list[dict]) -> None:
        from opentelemetry import trace

        # a source reads ahead of the frame's release: the root encloses that read too
        start = min([entry["start_ns"]] + [t["start_ns"] for t in timings])
        end = max([entry["end_ns"]] + [t["end_ns"] for t in timings])
        root = self._tracer.start_span(
            "frame", start_time=start + self._wall_offset,
            attributes={"cuvil.frame": entry["frame"], "cuvil.pipeline": self.pipeline,
                        "cuvil.e2e_ns": entry["end_ns"] - entry["start_ns"]})
        parent = trace.set_span_in_context(root)
        for timing in sorted(timings, key=lambda t: (t["start_ns"], t["stage"])):
            self._stage_span(timing, parent)
        root.end(end_time=end + self._wall_offset)

    def _stage_span(self, timing: dict, parent) -> None:
        op = self._stage_ops.get(timing["stage"], "")
        span = self._tracer.start_span(
            timing_key(timing), context=parent,
            start_time=timing["start_ns"] + self._wall_offset,
            attributes={"cuvil.frame": timing["frame"], "cuvil.op": op,
                        "cuvil.variant": timing["variant"], "cuvil.outcome": timing["outcome"],
                        "thread.id": timing["tid"], "thread.name": timing["worker"]})
        span.end(end_time=timing["end_ns"] + self._wall_offset)
