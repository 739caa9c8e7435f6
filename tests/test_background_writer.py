"""A sink's writes off the frame's path (``ops.background_writer``, the ``mcap`` sink's
``background_frames``): frame order, the same messages as writing inline, a failed write that
still fails the run, and a latency table that says what the writes cost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from mcap.reader import make_reader

from cuvil_perception.errors import OutputWriteError
from cuvil_perception.graph import FrameInfo, Pipeline
from cuvil_perception.ops.background_writer import BackgroundWriter
from cuvil_perception.rt import RunOptions, run_pipeline

from test_mcap_sink import DRIVE, SENSORS, T0, _frame_inputs, _sink

LATENCY = "/cuvil/latency"  # measured times: the one topic whose bytes differ run to run


def test_writes_run_in_submission_order_and_are_reported():
    done, reported = [], []
    writer = BackgroundWriter("t", depth=2, report=lambda frame, *rest: reported.append(frame))
    for k in range(20):
        writer.submit(k, lambda k=k: done.append(k))
    writer.close()
    assert done == list(range(20)) and reported == list(range(20))


def test_a_full_queue_blocks_the_sink_instead_of_growing():
    gate = threading.Event()
    writer = BackgroundWriter("t", depth=1)
    writer.submit(0, gate.wait)  # taken by the thread, which then blocks
    writer.submit(1, lambda: None)  # waits in the queue (depth 1)
    blocked = threading.Thread(target=writer.submit, args=(2, lambda: None))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # the third frame waits for room
    gate.set()
    blocked.join(5)
    assert not blocked.is_alive()
    writer.close()


def test_a_failed_write_is_raised_by_the_next_submit_and_nothing_is_written_after_it():
    done = []
    writer = BackgroundWriter("t", depth=1)

    def fail():
        raise OutputWriteError(Path("x.mcap"), "disk full")

    writer.submit(0, fail)
    with pytest.raises(OutputWriteError, match="disk full"):
        writer.drain()
    writer.submit(1, lambda: done.append(1))
    writer.close()
    assert done == []


def test_a_failed_write_surfaces_in_the_next_submit():
    writer = BackgroundWriter("t", depth=1)
    writer.submit(0, lambda: 1 / 0)
    writer._queue.join()  # the thread has run (and failed) frame 0
    with pytest.raises(ZeroDivisionError):
        writer.submit(1, lambda: None)
    writer.close()


def test_a_write_failing_at_close_is_raised_by_close():
    writer = BackgroundWriter("t", depth=4)
    writer.submit(0, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        writer.close()


def _messages(path: Path) -> list[tuple[str, int, bytes]]:
    with open(path, "rb") as f:
        return [(c.topic, m.log_time, m.data) for _, c, m in make_reader(f).iter_messages()
                if c.topic != LATENCY]


def test_background_frames_write_the_same_messages_in_the_same_order(tmp_path):
    files = {}
    for depth in (0, 3):
        files[depth] = tmp_path / f"d{depth}.mcap"
        op = _sink(tmp_path, path=str(files[depth]), background_frames=depth)
        for k in range(12):
            op.process(_frame_inputs(k), FrameInfo(k, T0 + k * 100_000_000))
        op.close()
    inline, background = _messages(files[0]), _messages(files[3])
    assert len(inline) == 12 * 4 and background == inline


def _run(tmp_path, depth: int):
    p = Pipeline("run")
    drive = p.add("drive", "replay", path=str(DRIVE))
    p.add("fx", "mcap", inputs={k: drive.out(k) for k in SENSORS},
          path=str(tmp_path / f"r{depth}.mcap"), background_frames=depth)
    return run_pipeline(p.validate(), RunOptions(workers=2, enforce_deadlines=False,
                                                 write_record=False))


def test_a_run_reports_the_background_writes_and_the_time_until_written(tmp_path):
    result = _run(tmp_path, 2)
    rows = {row.stage: row for row in result.report.rows}
    assert rows["fx@background"].frames == result.frames == 8
    assert rows["e2e+background"].frames == rows["e2e"].frames == 8
    written = {t["frame"]: t["end_ns"] for t in result.recorder.timings
               if t["variant"] == "background"}
    for e2e in result.recorder.e2e:  # a frame is written after it left the pipeline
        assert written[e2e["frame"]] >= e2e["end_ns"]
    assert rows["e2e+background"].p50 >= rows["e2e"].p50
    _run(tmp_path, 0)
    assert _messages(tmp_path / "r2.mcap") == _messages(tmp_path / "r0.mcap")


def test_a_failed_background_write_fails_the_run(tmp_path, monkeypatch):
    from cuvil_perception.ops import mcap_channels

    def full_disk(self, index):
        raise OutputWriteError(self.path, f"writing frame {index} failed (disk full)")

    monkeypatch.setattr(mcap_channels.Channels, "end_frame", full_disk)
    with pytest.raises(OutputWriteError, match="disk full"):
        _run(tmp_path, 2)


def test_side_rows_keep_their_variant_through_a_fleet_round_trip():
    from cuvil_perception.rt.stats import split_key, timing_key

    for variant, key in (("normal", "fx"), ("degraded", "fx"), ("reference", "fx@reference"),
                         ("background", "fx@background")):
        assert timing_key({"stage": "fx", "variant": variant}) == key
    assert split_key("fx@background") == ("fx", "background")
    assert split_key("fx@reference") == ("fx", "reference")
    assert split_key("e2e") == ("e2e", "normal")
