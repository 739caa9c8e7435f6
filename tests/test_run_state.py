"""RunState: the one object both executors fill and the run record is built from."""

from __future__ import annotations

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)

from cuvil_perception.errors import ExecutionError, OutputWriteError
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline, run_sequential
from cuvil_perception.rt.run_files import RecordFile
from cuvil_perception.rt.run_state import RunState


def small(out, fail_at: int | None = None) -> Pipeline:
    p = Pipeline("small")
    p.add("src", "test.scripted", frames=4, n=8)
    last = "src/value"
    if fail_at is not None:
        p.add("bad", "test.fail", inputs={"x": last}, fail_at=fail_at)
        last = "bad/y"
    p.add("out", "test.lines", inputs={"x": last}, path=str(out))
    return p.validate()


def test_status_and_stopped_say_how_the_run_ended(tmp_path) -> None:
    state = RunState(small(tmp_path / "o.jsonl"), RunOptions())
    assert (state.status(), state.stopped()) == ("completed", None)
    state.interrupted, state.stop_signal = True, "SIGTERM"
    assert (state.status(), state.stopped()) == ("terminated",
                                                 {"reason": "terminated (SIGTERM)"})
    state.stop_signal = "SIGINT"
    assert (state.status(), state.stopped()) == ("interrupted",
                                                 {"reason": "interrupted (Ctrl-C)"})
    state.error = RuntimeError("boom")
    assert (state.status(), state.stopped()) == ("failed", {"reason": "RuntimeError: boom"})
    state.failure = {"frame": 3, "stage": "s"}
    assert state.stopped() == {"frame": 3, "stage": "s", "reason": "on_miss: fail"}


def test_warn_keeps_each_message_once_and_passes_it_on(tmp_path) -> None:
    seen = []
    state = RunState(small(tmp_path / "o.jsonl"), RunOptions(warn=seen.append))
    for message in ("a", "b", "a"):
        state.warn(message)
    assert state.warnings == seen == ["a", "b"]


def test_both_executors_report_through_the_state(tmp_path) -> None:
    results = [runner(small(tmp_path / f"{name}.jsonl"), RunOptions(write_record=False))
               for name, runner in (("rt", run_pipeline), ("seq", run_sequential))]
    for result in results:
        assert result.frames == 4 and result.t0_ns > 0 and result.wall_s > 0
        assert [o["stage"] for o in result.outputs] == ["out"]
        assert [r.stage for r in result.report.rows][:2] == ["src", "out"]
    assert (tmp_path / "rt.jsonl").read_bytes() == (tmp_path / "seq.jsonl").read_bytes()


def test_a_failed_record_write_after_a_stage_error_raises_the_stage_error(tmp_path,
                                                                          monkeypatch) -> None:
    """The run's own error comes first; the record's write error becomes a warning (this path
    used to raise a NameError)."""
    def full_disk(self, record, status):
        raise OutputWriteError(self.path, "disk full")

    monkeypatch.setattr(RecordFile, "finish", full_disk)
    seen = []
    with pytest.raises(ExecutionError, match="stage 'bad'"):
        run_pipeline(small(tmp_path / "o.jsonl", fail_at=2), RunOptions(warn=seen.append))
    assert any("disk full" in message for message in seen)


def test_the_record_is_built_from_the_state(tmp_path) -> None:
    with pytest.raises(ExecutionError):
        run_pipeline(small(tmp_path / "o.jsonl", fail_at=1), RunOptions(workers=1))
    record = read_record(tmp_path / "o.jsonl.record.json")
    assert record["status"] == "failed" and record["frames"] == 1
    assert record["stopped"]["reason"].startswith("ExecutionError: stage 'bad'")
    assert record["live_skipped"] == 0 and record["compile"]["compiles_after_frame0"] == 0
