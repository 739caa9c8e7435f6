"""``run --otlp URL``: a replay of the sample drive exported to a local OTLP/HTTP receiver on
127.0.0.1 (the collector's own protobuf messages, decoded by ``opentelemetry-proto``): one
span per stage per frame with the Perfetto trace's timings, one trace per frame, and metrics
whose counts equal the run's."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest)

from cuvil_perception.rt.otlp import parse_endpoint  # noqa: E402

FRAMES = 4


def run_cli(argv: list[str]) -> str:
    """``cuvil-perception ARGV`` in a process of its own (the OpenTelemetry SDK and its HTTP
    stack imported fresh, whatever earlier tests did to this process's modules), which must
    exit 0; its stderr."""
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", *argv],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps every POST body by path."""

    def __init__(self):
        self.bodies: dict[str, list[bytes]] = {}
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def spans(self) -> list:
        out = []
        for body in self.bodies.get("/v1/traces", []):
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                for scope in resource_spans.scope_spans:
                    out += [(resource_spans.resource, span) for span in scope.spans]
        return out

    def metric_points(self) -> dict[str, list]:
        out: dict[str, list] = {}
        for body in self.bodies.get("/v1/metrics", []):
            request = ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        out.setdefault(metric.name, []).extend(
                            getattr(metric, kind).data_points)
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def exported(repo_root, tmp_path_factory):
    """One 4-frame replay of configs/demo.yaml with --trace and --otlp."""
    out = tmp_path_factory.mktemp("otlp")
    receiver = Receiver()
    try:
        run_cli(["run", str(repo_root / "configs" / "demo.yaml"), "--frames", str(FRAMES),
              "--out", str(out / "demo.jsonl"), "--trace", str(out / "trace.json"),
              "--otlp", receiver.url])
    finally:
        receiver.close()
    trace = json.loads((out / "trace.json").read_text())
    return receiver, trace


def _attrs(span) -> dict:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def test_one_span_per_stage_per_frame_with_the_perfetto_timings(exported):
    """Same (frame, name) pairs; start (relative to the first) and duration equal to the
    trace's to the nanosecond (the trace's µs floats round-trip within 1 ns)."""
    receiver, trace = exported
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    stages = [s for _, s in receiver.spans() if s.name != "frame"]
    assert len(stages) == len(events) > 0
    t0 = min(e["ts"] for e in events)
    first = min(s.start_time_unix_nano for s in stages)
    want = sorted((e["args"]["frame"], e["name"], round((e["ts"] - t0) * 1e3),
                   round(e["dur"] * 1e3)) for e in events)
    got = sorted((_attrs(s)["cuvil.frame"], s.name, s.start_time_unix_nano - first,
                  s.end_time_unix_nano - s.start_time_unix_nano) for s in stages)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for (_, _, start, dur), (_, _, want_start, want_dur) in zip(got, want):
        assert abs(start - want_start) <= 1 and abs(dur - want_dur) <= 1


def test_each_frame_is_one_trace_under_a_frame_span(exported):
    receiver, _ = exported
    spans = [s for _, s in receiver.spans()]
    roots = {s.trace_id: s for s in spans if s.name == "frame"}
    assert sorted(_attrs(r)["cuvil.frame"] for r in roots.values()) == list(range(FRAMES))
    for span in spans:
        if span.name == "frame":
            continue
        root = roots[span.trace_id]
        assert span.parent_span_id == root.span_id
        assert _attrs(span)["cuvil.frame"] == _attrs(root)["cuvil.frame"]
        assert root.start_time_unix_nano <= span.start_time_unix_nano
        assert span.end_time_unix_nano <= root.end_time_unix_nano
        assert _attrs(span)["thread.name"]
    for root in roots.values():
        assert 0 < _attrs(root)["cuvil.e2e_ns"] <= root.end_time_unix_nano \
            - root.start_time_unix_nano


def test_the_resource_names_the_service_pipeline_and_cpu(exported):
    from cuvil_perception import __version__
    from cuvil_perception.machine_info import cpu

    receiver, _ = exported
    resource, _ = receiver.spans()[0]
    attrs = _attrs(resource)
    assert attrs["service.name"] == "cuvil-perception"
    assert attrs["service.version"] == __version__
    assert attrs["cuvil.pipeline"] == "demo"
    assert attrs["host.cpu.model.name"] == cpu().model


def test_metrics_count_what_the_spans_show(exported):
    receiver, _ = exported
    points = receiver.metric_points()
    # cumulative temporality: the last point of each series holds the final count
    assert points["cuvil.frames.out"][-1].as_int == FRAMES
    assert points["cuvil.e2e.duration"][-1].count == FRAMES
    stage_counts = {}
    for point in points["cuvil.stage.duration"]:
        stage_counts[_attrs(point)["stage"]] = point.count
    spans = [s for _, s in receiver.spans() if s.name != "frame"]
    assert stage_counts == {name: sum(1 for s in spans if s.name == name)
                            for name in {s.name for s in spans}}


def test_a_collector_that_is_down_costs_spans_not_the_run(repo_root, tmp_path):
    receiver = Receiver()
    url = receiver.url
    receiver.close()  # nothing listens there now
    err = run_cli(["run", str(repo_root / "configs" / "demo.yaml"), "--frames", "2",
                   "--out", str(tmp_path / "demo.jsonl"), "--otlp", url])
    assert (tmp_path / "demo.jsonl").read_text().count("\n") == 2
    assert f"--otlp {url}: exporting" in err and "Traceback" not in err


@pytest.mark.parametrize("text", ["http://127.0.0.1:4318", "https://otel.example/prefix/"])
def test_endpoints(text):
    assert parse_endpoint(text) == text.rstrip("/")
