"""rt.spool.Spool: reads back exactly the dicts appended, like the list it replaces."""

from __future__ import annotations

import threading

import pytest

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
            recorder.add({"frame": i, "stage": "s", "start_ns": 0, "end_ns": 1, "cpu_ns": 1,
                          "worker": f"w{worker}", "tid": worker, "variant": "normal",
                          "outcome": "ok"})

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(recorder.timings) == 1200
    assert sorted((t["tid"], t["frame"]) for t in recorder.timings) == \
        sorted((w, i) for w in range(4) for i in range(300))
