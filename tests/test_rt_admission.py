"""Overload shedding at admission (rt.admission): costs on the fake clock, replays, bad records."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.errors import UsageError
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.rt.admission import AdmissionControl
from cuvil_perception.testing.clock import FakeClock
from cuvil_perception.testing.ops import ScriptedSource

FRAMES = 12


def pipeline(out: Path | None, cost=(150.0,), e2e: float | None = 200.0,
             deadline: float | None = None) -> Pipeline:
    """A 10 Hz source feeding a stage that takes 150 ms: 1.5x overloaded at rate 1.

    Timing tests leave the sink out (``out=None``): on the fake clock a stage running beside
    another sees the clock jump by the other's cost, so only a single worker stage gives exact
    times; `slow` is then the last stage and its frames are the delivered ones."""
    p = Pipeline("overload")
    p.e2e_deadline_ms = e2e
    p.add("src", "test.scripted", frames=FRAMES, n=4, dt_ms=100.0)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(cost), scale=2.0,
          deadline_ms=deadline)
    if out is not None:
        p.add("out", "test.lines", inputs={"y": "slow/y", "i": "src/index"}, path=str(out))
        p.add("log", "jsonl", inputs={"y": "slow/y"}, path=str(out.with_suffix(".log.jsonl")))
    return p.validate()


def run(p: Pipeline, **kw):
    kw.setdefault("rate", 1.0)
    return run_pipeline(p, RunOptions(workers=1, clock=FakeClock(), **kw))


def frames_written(path: Path) -> list[int]:
    return [json.loads(line)["frame"] for line in path.read_text().splitlines()]


def delivered(result) -> list[int]:
    """Frames `slow` computed (without a sink it is the last stage)."""
    return sorted(t["frame"] for t in result.recorder.timings if t["stage"] == "slow")


def e2e_ms(result) -> dict[int, float]:
    return {e["frame"]: (e["end_ns"] - e["start_ns"]) / 1e6 for e in result.recorder.e2e}


def test_without_shedding_frames_queue_and_every_later_one_is_late(tmp_path):
    result = run(pipeline(None), shed=False)
    late = {f: ms for f, ms in e2e_ms(result).items() if ms > 200.0}
    assert delivered(result) == list(range(FRAMES))
    assert len(late) >= FRAMES - 3  # backlog: frame k ends at 150 (k + 1) ms, arrived at 100 k
    assert max(e2e_ms(result).values()) > 500.0
    assert not any(d["kind"] == "admission_skip" for d in result.decisions)


def test_shedding_skips_at_admission_and_every_admitted_frame_is_on_time(tmp_path):
    result = run(pipeline(None))
    skips = [d for d in result.decisions if d["kind"] == "admission_skip"]
    written = delivered(result)
    assert skips and sorted(written + [d["frame"] for d in skips]) == list(range(FRAMES))
    assert all(ms <= 200.0 for ms in e2e_ms(result).values())
    assert set(e2e_ms(result)) == set(written)  # skipped frames have no e2e entry
    assert len(written) >= 7  # ~2 of every 3 frames at 1.5x overload (frames 0-1 warm up)
    for skip in skips:
        assert skip["action"] == "skip" and skip["stage"] is None
        assert skip["predicted_ms"] > skip["deadline_ms"] == 200.0
    assert result.actions == {"skip": len(skips)}
    record = read_record(result.record_path)
    assert [d["frame"] for d in record["decisions"]] == [d["frame"] for d in skips]
    assert {t["outcome"] for t in record["timings"] if t["frame"] in
            {d["frame"] for d in skips}} == {"skipped"}  # only their source read


def test_decisions_replay_skips_the_same_frames_and_gives_the_same_bytes(tmp_path):
    recorded = run(pipeline(tmp_path / "a.jsonl"))
    assert recorded.actions.get("skip")
    # replayed as fast as possible on a machine where nothing is slow: same frames, same bytes
    again = run(pipeline(tmp_path / "b.jsonl", cost=[0.0]), rate=0.0,
                decisions=recorded.record_path)
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    assert [d["frame"] for d in again.decisions if d["kind"] == "admission_skip"] == \
        [d["frame"] for d in recorded.decisions if d["kind"] == "admission_skip"]
    assert all(d["replayed"] for d in again.decisions)
    # the jsonl sink writes a line for every frame; a shed frame's line names its decision
    lines = [json.loads(x) for x in (tmp_path / "a.log.jsonl").read_text().splitlines()]
    assert [x["frame"] for x in lines] == list(range(FRAMES))
    skipped = {d["frame"] for d in recorded.decisions if d["kind"] == "admission_skip"}
    assert {x["frame"] for x in lines if x.get("dropped", {}).get("reason") ==
            "admission_skip"} == skipped
    assert (tmp_path / "b.log.jsonl").read_bytes() == (tmp_path / "a.log.jsonl").read_bytes()


@pytest.mark.parametrize("options", [dict(rate=0.0), dict(enforce_deadlines=False),
                                     dict(shed=False), dict(e2e=None)])
def test_no_shedding_as_fast_as_possible_without_deadlines_or_when_off(tmp_path, options):
    e2e = options.pop("e2e", 200.0)  # None: no deadline anywhere in the pipeline
    result = run(pipeline(None, e2e=e2e), **options)
    assert delivered(result) == list(range(FRAMES))
    assert not any(d["kind"] == "admission_skip" for d in result.decisions)


def test_a_pipeline_too_slow_even_when_idle_keeps_running_frames(tmp_path):
    result = run(pipeline(None, cost=[300.0]))
    written = delivered(result)
    assert result.actions.get("skip")  # it does not queue every frame ...
    assert len(written) >= FRAMES // 4 and max(written) >= FRAMES - 3  # ... nor starve


def test_on_the_fake_clock_admission_does_not_depend_on_thread_timing(tmp_path, monkeypatch):
    """The scheduler waits for each sample and sees virtual time by the results it settled, so
    a reader thread that is late (a loaded machine) changes no decision."""
    def decisions(result):
        return delivered(result), [d["frame"] for d in result.decisions]

    prompt = run(pipeline(None, cost=[300.0]))
    read = ScriptedSource.read

    def late_read(self):
        time.sleep(0.005)  # real time only: the fake clock does not move
        return read(self)

    monkeypatch.setattr(ScriptedSource, "read", late_read)
    late = run(pipeline(None, cost=[300.0]))
    assert prompt.actions.get("skip") and decisions(late) == decisions(prompt)


def test_without_an_e2e_deadline_the_budget_is_the_stage_deadlines_on_the_longest_path(tmp_path):
    result = run(pipeline(None, e2e=None, deadline=200.0))
    skips = [d for d in result.decisions if d["kind"] == "admission_skip"]
    assert skips and {d["deadline_ms"] for d in skips} == {200.0}


def test_prediction_plays_the_frames_in_flight_forward():
    p = pipeline(Path("unused.jsonl"))
    stages = [s for s in p.ordered() if s.id != "src"]
    control = AdmissionControl(stages, 200.0, active=True)
    for ms in (10.0, 20.0, 30.0):
        control.observe("slow", "normal", int(ms * 1e6))
    control.observe("out", "normal", 0)
    control.observe("src", "normal", int(1e9))  # sources are not worker stages: ignored
    assert control.cost_ns("slow") == int(28e6)  # 90th percentile of 10, 20, 30
    normal = lambda stage, frame: "normal"  # noqa: E731
    # slow busy on frame 4 since t=0 (ends 28), frame 5 queued (ends 56), then the new frame
    in_flight = [(4, {"slow": False}), (5, {"slow": False})]
    finish = control.predict_finish_ns(int(5e6), in_flight, {"slow": (4, 0)}, normal, 6)
    assert finish == int(84e6)
    assert control.decide(6, 0, int(5e6), in_flight, {"slow": (4, 0)}, normal) is None
    late = control.decide(6, int(-150e6), int(5e6), in_flight, {"slow": (4, 0)}, normal)
    assert late["predicted_ms"] == 234.0 and late["kind"] == "admission_skip"


def fork_join(sink_tag: str) -> list:
    """Two stages side by side (a 30 ms, b 40 ms) joined by a 10 ms sink: the worker stages."""
    p = Pipeline("fork")
    p.e2e_deadline_ms = 200.0
    p.add("src", "test.scripted", frames=4, n=4, dt_ms=100.0)
    p.add("a", "test.cost", inputs={"x": "src/value"}, cost_ms=[30.0])
    p.add("b", "test.cost", inputs={"x": "src/value"}, cost_ms=[40.0])
    p.add("sink", "test.lines", inputs={"a": "a/y", "b": "b/y"}, path="unused.jsonl",
          tag=sink_tag)
    return [s for s in p.validate().ordered() if s.id != "src"]


def measured(stages, workers: int | None) -> AdmissionControl:
    control = AdmissionControl(stages, 200.0, active=True, workers=workers)
    for sid, ms in (("a", 30.0), ("b", 40.0), ("sink", 10.0)):
        control.observe(sid, "normal", int(ms * 1e6))
    return control


@pytest.mark.parametrize("workers, alone_ms", [(2, 50.0), (None, 50.0), (1, 80.0), (3, 50.0)])
def test_prediction_runs_compute_stages_on_the_pool_threads(workers, alone_ms):
    # side by side only when there are threads for both: on one worker a and b take turns
    control = measured(fork_join("compute"), workers)
    normal = lambda stage, frame: "normal"  # noqa: E731
    assert control.predict_finish_ns(0, [], {}, normal, 0) == int(alone_ms * 1e6)


@pytest.mark.parametrize("sink_tag, finish_ms", [("compute", 60.0), ("io", 50.0)])
def test_a_frame_waits_for_the_thread_the_previous_frames_sink_holds(sink_tag, finish_ms):
    # frame 4's sink runs since t=0 (ends at 10); frame 5 arrives at 0 on two workers: a compute
    # sink holds one of them, so b starts at 10 (ends 50) and the sink at 50; an io sink has its
    # own thread, so a and b start at once and the sink runs 40-50
    control = measured(fork_join(sink_tag), 2)
    normal = lambda stage, frame: "normal"  # noqa: E731
    in_flight = [(4, {"a": True, "b": True, "sink": False})]
    busy = {"sink": (4, 0)}
    assert control.predict_finish_ns(0, in_flight, busy, normal, 5) == int(finish_ms * 1e6)
    late = control.decide(5, int(-145e6), 0, in_flight, busy, normal)
    assert (late is not None) == (sink_tag == "compute")  # 205 ms vs 195 ms, budget 200


def test_prediction_of_frames_queued_behind_each_other_on_one_worker():
    # frame 1: a done, b running since 0 (ends 40), sink queued; frame 2 new at t=0: one worker
    # runs b(1) 0-40, then sink(1) 40-50 and a(2) (both ready at 40: the frame in flight first),
    # a(2) 50-80, b(2) 80-120, sink(2) 120-130
    control = measured(fork_join("compute"), 1)
    normal = lambda stage, frame: "normal"  # noqa: E731
    in_flight = [(1, {"a": True, "b": False, "sink": False})]
    assert control.predict_finish_ns(0, in_flight, {"b": (1, 0)}, normal, 2) == int(130e6)


@pytest.mark.parametrize("entry", [{"kind": "admission_skip", "frame": "3"},
                                   {"kind": "admission_skip", "frame": True},
                                   {"kind": "admission_skip"},
                                   {"kind": "shed", "frame": 3}])
def test_a_malformed_admission_decision_is_a_usage_error(tmp_path, entry):
    recorded = run(pipeline(tmp_path / "a.jsonl"))
    record = json.loads(Path(recorded.record_path).read_text())
    record["decisions"] = [entry]
    bad = tmp_path / "bad.record.json"
    bad.write_text(json.dumps(record))
    with pytest.raises(UsageError, match="malformed decision entry"):
        run(pipeline(tmp_path / "b.jsonl"), decisions=bad)
