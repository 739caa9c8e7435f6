"""Deadline miss policies with costs driven by the fake clock, and --decisions replays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.errors import DeadlineFailure
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.testing.clock import FakeClock

SLOW = [1.0, 1.0, 30.0, 1.0, 1.0, 1.0, 30.0, 1.0, 1.0, 1.0]  # frames 2 and 6 miss a 10 ms deadline


def pipeline(out: Path, on_miss: str, cost=SLOW, frames: int = 10, degrade=None,
             e2e: float | None = None) -> Pipeline:
    p = Pipeline(f"policy-{on_miss}")
    p.e2e_deadline_ms = e2e
    p.add("src", "test.scripted", frames=frames, n=4)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(cost), scale=2.0,
          deadline_ms=10, on_miss=on_miss, degrade=degrade)
    p.add("after", "test.cost", inputs={"x": "slow/y"}, cost_ms=[0.0], scale=1.0)
    p.add("out", "test.lines", inputs={"y": "after/y", "i": "src/index"}, path=str(out))
    return p.validate()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run(p: Pipeline, **kw):
    kw.setdefault("enforce_deadlines", True)  # rate 0 alone only measures (see test below)
    return run_pipeline(p, RunOptions(workers=1, clock=FakeClock(), **kw))


def test_drop_removes_the_frame_downstream(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run(pipeline(out, "drop"))
    assert [x["frame"] for x in lines(out)] == [0, 1, 3, 4, 5, 7, 8, 9]
    assert result.actions == {"drop": 2}
    assert [(d["frame"], d["stage"], d["action"]) for d in result.decisions] == \
        [(2, "slow", "drop"), (6, "slow", "drop")]
    assert result.decisions[0]["elapsed_ms"] == 30.0 and result.decisions[0]["deadline_ms"] == 10
    assert result.report.row("slow").misses == 2
    # `after` was skipped for dropped frames: on frame 9 it is on its 8th call (count 7),
    # while `slow` ran every frame (count 9)
    x = np.random.default_rng(9).standard_normal(4).astype(np.float32)
    expected = (x * np.float32(2.0) + np.float32(9)) * np.float32(1.0) + np.float32(7)
    assert lines(out)[-1]["inputs"]["y"] == expected.tolist()
    assert result.report.row("after").frames == 8


def test_reuse_last_marks_stale_with_the_original_frame(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run(pipeline(out, "reuse_last"))
    got = lines(out)
    assert [x["frame"] for x in got] == list(range(10))
    assert got[2]["stale"] == {"slow/y": 1} and got[6]["stale"] == {"slow/y": 5}
    assert all(x["stale"] == {} for i, x in enumerate(got) if i not in (2, 6))
    # frame 2 carries frame 1's value of `slow` (then `after` adds its own call count)
    assert got[2]["inputs"]["y"] != got[1]["inputs"]["y"]
    assert result.actions == {"reuse_last": 2}


def test_reuse_last_without_a_previous_output_drops(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run(pipeline(out, "reuse_last", cost=[30.0, 1.0]))
    got = lines(out)
    assert [x["frame"] for x in got] == list(range(1, 10))  # frame 0 had nothing to reuse
    assert got[1]["stale"] == {"slow/y": 1}
    assert result.decisions[0]["frame"] == 0 and result.decisions[0]["action"] == "reuse_last"


def test_degrade_switches_for_n_frames_then_tries_again(tmp_path):
    out = tmp_path / "o.jsonl"
    degrade = {"params": {"cost_ms": [2.0], "scale": 10.0}, "frames": 2}
    result = run(pipeline(out, "degrade", degrade=degrade))
    record = read_record(result.record_path)
    variants = {t["frame"]: t["variant"] for t in record["timings"] if t["stage"] == "slow"}
    assert [variants[f] for f in range(10)] == ["normal"] * 3 + ["degraded"] * 2 + \
        ["normal"] * 2 + ["degraded"] * 2 + ["normal"]
    assert result.actions == {"degrade": 2}
    assert [x["frame"] for x in lines(out)] == list(range(10))  # the late result is kept


def test_fail_stops_cleanly_with_a_report_and_sinks_keep_their_lines(tmp_path):
    out = tmp_path / "o.jsonl"
    with pytest.raises(DeadlineFailure) as caught:
        run(pipeline(out, "fail"))
    failure = caught.value
    assert "stage 'slow'" in str(failure) and "frame 2" in str(failure)
    assert failure.report["stage"] == "slow" and failure.report["frame"] == 2
    assert failure.report["elapsed_ms"] == 30.0 and failure.report["deadline_ms"] == 10
    assert failure.report["actions"] == {"fail": 1}
    assert [x["frame"] for x in lines(out)] == [0, 1]  # flushed and closed
    record = read_record(failure.report["record"])
    assert record["stopped"]["reason"] == "on_miss: fail" and record["stopped"]["frame"] == 2


def test_no_deadlines_measures_but_does_not_act(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run(pipeline(out, "drop"), enforce_deadlines=False)
    assert len(lines(out)) == 10 and result.decisions == []
    assert result.report.row("slow").misses == 2


def e2e_pipeline(out: Path, e2e: float) -> Pipeline:
    p = Pipeline("e2e", e2e_deadline_ms=e2e)
    p.add("src", "test.scripted", frames=10, n=4)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(SLOW), scale=2.0)
    p.add("out", "jsonl", inputs={"y": "slow/y"}, path=str(out))
    return p.validate()


def test_e2e_deadline_drops_late_frames_before_the_sinks_with_one_line_each(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run(e2e_pipeline(out, 20.0), max_in_flight=1)  # one frame at a time: no queueing
    assert result.actions == {"drop": 2}
    assert [(d["frame"], d["kind"]) for d in result.decisions] == [(2, "e2e_miss"),
                                                                  (6, "e2e_miss")]
    got = lines(out)
    assert [x["frame"] for x in got] == list(range(10))
    assert got[2]["dropped"] == {"stage": None, "policy": "drop", "reason": "e2e_miss"}
    assert got[2]["outputs"] == {} and "dropped" not in got[3]
    # replaying the record drops the same frames on a machine where nothing is late
    again = tmp_path / "again.jsonl"
    p = e2e_pipeline(again, 20.0)
    p.stage("slow").params["cost_ms"] = [0.0]
    run(p.validate(), decisions=result.record_path, max_in_flight=1)
    assert again.read_bytes() == out.read_bytes()


def test_rate_0_measures_deadlines_without_acting_unless_asked(tmp_path):
    out = tmp_path / "o.jsonl"
    result = run_pipeline(pipeline(out, "drop"), RunOptions(workers=1, clock=FakeClock()))
    assert len(lines(out)) == 10 and result.decisions == []
    assert result.report.row("slow").misses == 2
    paced = run_pipeline(pipeline(out, "drop"), RunOptions(workers=1, clock=FakeClock(),
                                                          rate=1.0))
    assert paced.actions == {"drop": 2}
    assert read_record(paced.record_path)["options"]["enforce_deadlines"] is True


@pytest.mark.parametrize("on_miss", ["drop", "reuse_last", "degrade"])
def test_decisions_replay_reproduces_outputs_without_measuring(tmp_path, on_miss):
    degrade = {"params": {"cost_ms": [2.0], "scale": 10.0}, "frames": 2}
    recorded = tmp_path / "recorded.jsonl"
    result = run(pipeline(recorded, on_miss, degrade=degrade))
    assert result.decisions
    # A machine where nothing is late: measuring gives other bytes, re-applying gives the same.
    fast = tmp_path / "fast.jsonl"
    run(pipeline(fast, on_miss, cost=[0.0], degrade=degrade))
    assert fast.read_bytes() != recorded.read_bytes()
    replayed = tmp_path / "replayed.jsonl"
    again = run(pipeline(replayed, on_miss, cost=[0.0], degrade=degrade),
                decisions=result.record_path)
    assert replayed.read_bytes() == recorded.read_bytes()
    assert [(d["frame"], d["action"]) for d in again.decisions] == \
        [(d["frame"], d["action"]) for d in result.decisions]
    assert all(d["replayed"] for d in again.decisions)


def test_decisions_replay_of_a_failed_run_fails_at_the_same_frame(tmp_path):
    with pytest.raises(DeadlineFailure) as caught:
        run(pipeline(tmp_path / "a.jsonl", "fail"))
    with pytest.raises(DeadlineFailure) as again:
        run(pipeline(tmp_path / "b.jsonl", "fail", cost=[0.0]),
            decisions=caught.value.report["record"])
    assert again.value.report["frame"] == 2
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_decisions_from_a_foreign_file_are_a_usage_error(tmp_path):
    from cuvil_perception.errors import UsageError

    bogus = tmp_path / "x.json"
    bogus.write_text("{}")
    with pytest.raises(UsageError, match="not a cuvil run record"):
        run(pipeline(tmp_path / "o.jsonl", "drop"), decisions=bogus)
    missing = tmp_path / "missing.json"
    with pytest.raises(UsageError, match="not found"):
        run(pipeline(tmp_path / "o.jsonl", "drop"), decisions=missing)


def test_dropped_frames_keep_their_jsonl_line_naming_the_decision(tmp_path):
    from cuvil_perception.cli.frame_summary import Column, frame_summary_table
    from cuvil_perception.eval.runlog import read_run

    p = Pipeline("drops")
    p.add("src", "test.scripted", frames=10, n=4)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(SLOW), scale=2.0,
          deadline_ms=10, on_miss="drop")
    p.add("after", "test.cost", inputs={"x": "slow/y"}, cost_ms=[0.0], scale=1.0)
    p.add("out", "jsonl", inputs={"y": "after/y"}, path=str(tmp_path / "o.jsonl"))
    run(p.validate())
    got = lines(tmp_path / "o.jsonl")
    assert [x["frame"] for x in got] == list(range(10))  # line k is frame k
    dropped = {x["frame"]: x["dropped"] for x in got if "dropped" in x}
    assert dropped == {k: {"stage": "slow", "policy": "drop", "reason": "deadline_miss"}
                       for k in (2, 6)}
    assert got[2]["outputs"] == {} and got[2]["timestamp_ns"] > got[1]["timestamp_ns"]
    assert read_run(tmp_path / "o.jsonl")[6].dropped["stage"] == "slow"
    column = Column("after", "y", lambda array: f"{len(array)} values")
    table = frame_summary_table(tmp_path / "o.jsonl", [column])
    assert table.columns[2]._cells[2] == "dropped (slow deadline_miss)"
    assert table.columns[2]._cells[3] == "4 values"
