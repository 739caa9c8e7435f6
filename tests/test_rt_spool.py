"""rt.spool.Spool: reads back exactly the dicts appended, like the list it replaces."""

from __future__ import annotations

import threading

import pytest

from cuvil_perception.rt.frame_timing import TIMING_INTS, TIMING_TEXTS, FrameTiming
from cuvil_perception.rt.spool import Spool
from cuvil_perception.rt.stats import LatencyRecorder


def test_spool_reads_back_what_was_appended_in_order_with_slices():
    spool = Spool(("frame", "start_ns", "sensor_ns"), ("stage", "variant"))
    entries = []
    for i in range(1000):  # more than one write buffer
        entry = {"frame": i, "start_ns": 2**62 + i, "stage": f"s{i % 3}",
                 "variant": None if i % 5 == 0 else "normal"}
        if i % 7:
            entry["sensor_ns"] = -i  # an optional field, absent on some entries
        spool.append(entry)
        entries.append(entry)
    assert len(spool) == 1000 and list(spool) == entries
    assert spool[0] == entries[0] and spool[-1] == entries[-1]
    assert spool[990:] == entries[990:] and spool[10:20:3] == entries[10:20:3]
    assert spool[5:2] == [] and sorted(spool, key=lambda e: -e["frame"])[0] == entries[-1]
    with pytest.raises(IndexError):
        spool[1000]
    with pytest.raises(KeyError, match="no field"):
        spool.append({"frame": 1, "other": 2})


def test_recorder_keeps_concurrent_adds():
    recorder = LatencyRecorder()

    def add(worker: int) -> None:
        for i in range(300):
            recorder.add(FrameTiming(i, "s", 0, 1, 1, f"w{worker}", worker))

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(recorder.timings) == 1200
    assert sorted((t["tid"], t["frame"]) for t in recorder.timings) == \
        sorted((w, i) for w in range(4) for i in range(300))


def test_a_frame_timing_reads_back_as_the_record_dict():
    """The spool's columns (and so the run record's key order) come from ``FrameTiming``; a
    None field (no ``wait_ns`` outside compute calls) reads back missing, as before."""
    assert TIMING_INTS == ("frame", "start_ns", "end_ns", "cpu_ns", "tid", "wait_ns")
    assert TIMING_TEXTS == ("stage", "worker", "variant", "outcome")
    recorder = LatencyRecorder()
    recorder.add(FrameTiming(3, "bev", 10, 25, 12, "cuvil-compute_0", 7, wait_ns=2))
    recorder.add(FrameTiming(3, "src", 1, 9, 8, "reader", 8).with_outcome("skipped"))
    first, second = recorder.timings
    assert list(first) == [*TIMING_INTS, *TIMING_TEXTS]
    assert first == {"frame": 3, "stage": "bev", "start_ns": 10, "end_ns": 25, "cpu_ns": 12,
                     "worker": "cuvil-compute_0", "tid": 7, "variant": "normal",
                     "outcome": "ok", "wait_ns": 2}
    assert "wait_ns" not in second and second["outcome"] == "skipped"
