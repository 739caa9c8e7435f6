"""The real-time executor: determinism, frame order, errors, pacing, records and traces."""

from __future__ import annotations

import json
import time
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.errors import DriveError, ExecutionError, UsageError
from cuvil_perception.graph import Op, Pipeline, PortSpec, Sample, Source, register
from cuvil_perception.rt import RunOptions, read_record, run_pipeline, run_sequential
from cuvil_perception.testing.clock import FakeClock



def branchy(out: Path, frames: int = 12, n: int = 64) -> Pipeline:
    """Two parallel compute branches joined in one sink (exercises overlap and joins)."""
    p = Pipeline("branchy")
    p.add("src", "test.scripted", frames=frames, n=n)
    p.add("a", "test.cost", inputs={"x": "src/value"}, cost_ms=[0.0])
    p.add("b", "test.work", inputs={"x": "src/value"}, reps=3)
    p.add("c", "test.work", inputs={"x": "a/y"}, reps=2)
    p.add("out", "test.lines", inputs={"b": "b/y", "c": "c/y", "i": "src/index"},
          path=str(out))
    return p.validate()


def test_workers_1_and_2_give_identical_bytes_run_after_run(tmp_path):
    digests = set()
    for run in range(3):
        for workers in (1, 2):
            out = tmp_path / f"out-{workers}-{run}.jsonl"
            result = run_pipeline(branchy(out), RunOptions(workers=workers))
            assert result.frames == 12
            digests.add(out.read_bytes())
    assert len(digests) == 1
    sequential = tmp_path / "seq.jsonl"
    run_sequential(branchy(sequential))
    assert sequential.read_bytes() in digests


def test_sink_sees_frames_in_order_and_stateful_ops_stay_in_order(tmp_path):
    out = tmp_path / "o.jsonl"
    run_pipeline(branchy(out, frames=20), RunOptions(workers=2, max_in_flight=6))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["frame"] for line in lines] == list(range(20))
    assert [line["inputs"]["i"] for line in lines] == [[i] for i in range(20)]


def test_frames_limit_and_result_fields(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run_pipeline(branchy(out), RunOptions(frames=5, workers=2))
    assert result.frames == 5 and len(out.read_text().splitlines()) == 5
    assert result.report.row("b").frames == 5 and result.report.row("e2e").frames == 5
    assert result.outputs == [{"stage": "out", "op": "test.lines", "param": "path",
                               "path": str(out)}]
    assert result.record_path == out.with_name("o.jsonl.record.json")


def test_record_has_pipeline_versions_machine_timings(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run_pipeline(branchy(out, frames=4), RunOptions(workers=2))
    record = read_record(result.record_path)
    assert record["pipeline"]["name"] == "branchy"
    assert [s["id"] for s in record["pipeline"]["stages"]] == ["src", "a", "b", "c", "out"]
    assert {"cuvil_perception", "numpy", "llvmlite", "llvm", "opencv", "python"} <= \
        set(record["versions"])
    assert record["machine"]["cores"] >= 1 and record["machine"]["cpu"]
    assert len(record["timings"]) == 4 * 5 and len(record["e2e"]) == 4
    first = record["timings"][0]
    assert first["end_ns"] >= first["start_ns"] and first["worker"] and first["cpu_ns"] >= 0
    assert record["compile"]["compiles_after_frame0"] == 0
    assert record["decisions"] == []


def test_yaml_pipeline_text_is_kept_in_record(tmp_path):
    yaml_path = tmp_path / "p.yaml"
    yaml_path.write_text(
        "pipeline: tiny\nstages:\n"
        "  - {id: src, op: test.scripted, params: {frames: 3}}\n"
        "  - {id: out, op: test.lines, inputs: {v: src/value}, params: {path: o.jsonl}}\n")
    from cuvil_perception.graph import load_pipeline

    result = run_pipeline(load_pipeline(yaml_path), RunOptions(workers=1))
    assert read_record(result.record_path)["pipeline"]["text"] == yaml_path.read_text()
    assert (tmp_path / "o.jsonl").is_file()


def test_trace_has_one_slice_per_stage_per_frame(tmp_path):
    trace = tmp_path / "trace.json"
    run_pipeline(branchy(tmp_path / "o.jsonl", frames=6), RunOptions(workers=2, trace=trace))
    events = json.loads(trace.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    pairs = sorted((e["name"], e["args"]["frame"]) for e in slices)
    assert pairs == sorted((s, f) for s in ("src", "a", "b", "c", "out") for f in range(6))
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {e["tid"] for e in slices} <= set(names)
    assert any(n.startswith("cuvil-compute") for n in names.values())
    assert any(n.startswith("cuvil-io-") for n in names.values())
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)


def test_stage_error_stops_cleanly_and_sink_keeps_its_lines(tmp_path):
    out = tmp_path / "o.jsonl"
    p = Pipeline("boom")
    p.add("src", "test.scripted", frames=10)
    p.add("f", "test.fail", inputs={"x": "src/value"}, fail_at=4)
    p.add("out", "test.lines", inputs={"y": "f/y"}, path=str(out))
    with pytest.raises(ExecutionError, match=r"stage 'f' \(op test.fail\) failed on frame 4"):
        run_pipeline(p.validate(), RunOptions(workers=2))
    assert [json.loads(x)["frame"] for x in out.read_text().splitlines()] == [0, 1, 2, 3]
    record = json.loads(out.with_name("o.jsonl.record.json").read_text())
    assert "scripted failure" in record["stopped"]["reason"]


@register
class _BrokenDrive(Source):
    name = "rttest.broken_drive"

    def read(self):
        raise DriveError("drive/velodyne_points/data/0000000003.bin: size 17 is not a multiple "
                         "of 16")


def test_source_user_error_keeps_its_type(tmp_path):
    p = Pipeline("bad")
    p.add("src", "rttest.broken_drive")
    with pytest.raises(DriveError, match="multiple of 16"):
        run_pipeline(p.validate(), RunOptions(write_record=False))


def test_rate_paces_on_recorded_timestamps_with_fake_clock(tmp_path):
    clock = FakeClock()
    start = clock.now_ns()
    p = Pipeline("paced")
    p.add("src", "test.scripted", frames=6, dt_ms=100.0)
    p.add("out", "test.lines", inputs={"v": "src/value"}, path=str(tmp_path / "o.jsonl"))
    run_pipeline(p.validate(), RunOptions(rate=1.0, clock=clock, workers=1))
    assert clock.now_ns() - start >= 500_000_000  # frame 5 released 500 ms after frame 0
    clock2 = FakeClock()
    run_pipeline(p, RunOptions(rate=0.5, clock=clock2, workers=1))
    assert clock2.now_ns() - 1_000_000_000 >= 1_000_000_000  # half speed: 1 s


def test_bad_options_are_usage_errors(tmp_path):
    p = branchy(tmp_path / "o.jsonl")
    with pytest.raises(UsageError, match="--frames"):
        run_pipeline(p, RunOptions(frames=0))
    with pytest.raises(UsageError, match="no reference_process"):
        run_pipeline(p, RunOptions(reference_stages=("a",)))


def test_reference_timing_is_recorded_but_never_reaches_outputs(tmp_path):
    plain, timed = tmp_path / "plain.jsonl", tmp_path / "timed.jsonl"
    run_pipeline(branchy(plain, frames=5), RunOptions(workers=2))
    result = run_pipeline(branchy(timed, frames=5),
                          RunOptions(workers=2, reference_stages=("b",)))
    assert plain.read_bytes() == timed.read_bytes()
    assert result.report.row("b@reference").frames == 5


def test_live_source_keeps_only_the_newest_sample(tmp_path):
    from cuvil_perception.rt.read_ahead import END, SourceReader

    class Burst:
        def __init__(self):
            self.i = 0

        def read(self):
            self.i += 1
            return Sample(self.i, {"v": None}) if self.i <= 50 else None

    source = Burst()
    reader = SourceReader("cam", source, FakeClock(), live=True, depth=4)
    reader.start()
    deadline = time.monotonic() + 60  # a safety net only: it waits for the event
    while source.i <= 50 and time.monotonic() < deadline:  # the reader runs far ahead of us
        time.sleep(0.001)
    assert reader.get().sample.timestamp_ns == 50  # only the newest waited in the queue
    assert reader.get().sample is END
    assert reader.skipped == 49
    reader.stop()


@register
class _InPlace(Op):
    """Writes its output into one persistent buffer (declares it, so the executor copies)."""

    name = "rttest.inplace"
    reuses_output_buffers = True

    def input_ports(self):
        return (PortSpec("x", "float32", (None,)),)

    def output_ports(self):
        return (PortSpec("y", "float32", self.connected["x"].shape),)

    def open(self, ctx):
        self.buffer = np.zeros(self.connected["x"].shape, np.float32)

    def process(self, inputs, frame):
        np.multiply(inputs["x"], 3.0, out=self.buffer)
        return {"y": self.buffer}


def test_ops_that_reuse_output_buffers_get_copies(tmp_path):
    def build(out):
        p = Pipeline("inplace")
        p.add("src", "test.scripted", frames=12, n=16)
        p.add("fill", "rttest.inplace", inputs={"x": "src/value"})
        p.add("slow", "test.cost", inputs={"x": "fill/y"}, cost_ms=[2.0])  # real clock: sleeps
        p.add("out", "test.lines", inputs={"a": "fill/y", "b": "slow/y"}, path=str(out))
        return p.validate()

    run_pipeline(build(tmp_path / "rt.jsonl"), RunOptions(workers=2, max_in_flight=6))
    run_sequential(build(tmp_path / "seq.jsonl"))
    assert (tmp_path / "rt.jsonl").read_bytes() == (tmp_path / "seq.jsonl").read_bytes()


def test_ctrl_c_stops_cleanly_and_still_reports(tmp_path):
    def progress(done, total):
        if done == 3:
            raise KeyboardInterrupt  # what Ctrl-C raises on the main thread

    out = tmp_path / "o.jsonl"
    result = run_pipeline(branchy(out, frames=50), RunOptions(workers=2, progress=progress))
    assert result.interrupted and result.frames == 3
    assert [json.loads(x)["frame"] for x in out.read_text().splitlines()][:3] == [0, 1, 2]
    record = read_record(result.record_path)
    assert record["stopped"] == {"reason": "interrupted (Ctrl-C)"} and record["frames"] == 3


def test_options_are_frozen_and_a_run_keeps_the_callers(tmp_path):
    """The run adds its record's progress and a clock to a copy; the caller's callback still
    sees every frame, and the options it passed are unchanged."""
    seen = []
    options = RunOptions(workers=2, progress=lambda done, total: seen.append((done, total)),
                         frames=5)
    with pytest.raises(FrozenInstanceError):
        options.frames = 3
    result = run_pipeline(branchy(tmp_path / "o.jsonl"), options)
    assert seen == [(n, 5) for n in range(1, 6)] and read_record(result.record_path)["frames"] == 5
    assert options.clock is None and options.monitors == () and options.frames == 5


@register
class _Constant(Op):
    """A compute op with no inputs: a pipeline of it and a sink has stages but no source."""

    name = "rttest.constant"

    def output_ports(self):
        return (PortSpec("y", "float32", (1,)),)

    def process(self, inputs, frame):
        return {"y": np.zeros(1, np.float32)}


def test_a_pipeline_without_source_is_a_usage_error():
    q = Pipeline("no-source")
    q.add("k", "rttest.constant")
    q.add("out", "test.lines", inputs={"y": "k/y"}, path="/dev/null")
    for runner in (run_pipeline, run_sequential):
        with pytest.raises(UsageError, match="no source stage"):
            runner(q.validate(), RunOptions(write_record=False))


def test_paced_replay_reads_while_the_pipeline_is_idle(tmp_path):
    """A paced reader reads its next sample when the pipeline is idle (``SourceReader``'s gate).

    Read-ahead in a paced replay: sample j is read once the scheduler took sample j-2 into
    waiting (right after admitting frame j-3), so without the gate read j starts while frame
    j-3 is processed; with it, after frame j-3 finished. Both ends are stamped on the run
    clock in that order of events (the frame's end before the pipeline goes idle, the read's
    start after the gate opened), so this is no race. The gate waits at most one frame period
    from frame j-3's admission: only a frame in flight that long (a loaded machine) may see the
    read, so such frames are left out (all of them only when every frame was that slow); a
    100 ms period (10x the frame's cost) leaves few out even on a loaded machine."""
    dt_ms, count = 100.0, 8
    p = Pipeline("paced-real")
    p.add("src", "test.scripted", frames=count, dt_ms=dt_ms)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=[10.0])  # real clock: sleeps
    p.add("out", "test.lines", inputs={"y": "slow/y"}, path=str(tmp_path / "o.jsonl"))
    result = run_pipeline(p.validate(), RunOptions(rate=1.0, workers=2, write_record=False))
    reads = {t["frame"]: t for t in result.recorder.timings if t["stage"] == "src"}
    frames = {f["frame"]: f for f in result.recorder.e2e}
    assert len(reads) == len(frames) == count
    period_ns = dt_ms * 1e6
    checked = [j for j in range(3, count)  # 0.9: the gate's timeout is no exact sleep
               if frames[j - 3]["end_ns"] - frames[j - 3]["start_ns"] < 0.9 * period_ns]
    assert [j for j in checked if reads[j]["start_ns"] < frames[j - 3]["end_ns"]] == []
