"""Runtime placement (rt.placement): intra-op threads per network and the lines `run` prints."""

from __future__ import annotations

from pathlib import Path

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, run_pipeline
from cuvil_perception.rt.placement import intra_op_threads, opencv_threads, usable_cores

REPO = Path(__file__).resolve().parents[1]


def test_each_network_gets_its_share_of_the_cores():
    assert intra_op_threads(workers=2, cores=2) == 1  # two detectors, two cores: one each
    assert intra_op_threads(workers=1, cores=2) == 2  # one stage at a time may use both
    assert intra_op_threads(workers=4, cores=2) == 1
    assert intra_op_threads(workers=2, cores=8) == 4
    assert intra_op_threads(workers=3) == max(1, usable_cores() // 3)


def test_run_reports_one_placement_line_per_stage(tmp_path):
    p = Pipeline("place")
    p.rt = {"cpu_affinity": {"io": [0]}}
    p.add("src", "test.scripted", frames=2)
    p.add("work", "test.pass", inputs={"x": "src/value"})
    p.add("out", "test.lines", inputs={"y": "work/y"}, path=str(tmp_path / "o.jsonl"))
    result = run_pipeline(p.validate(), RunOptions(workers=2, write_record=False))
    header, *lines, threads = result.placement
    assert header.startswith(f"{usable_cores()} core(s): compute pool of 2 worker(s), 2 io")
    assert [line.split()[:2] for line in lines] == [["src", "io"], ["work", "compute"],
                                                   ["out", "io"]]
    assert "reader thread cuvil-io-src, CPUs 0" in lines[0]
    assert "compute pool (2 worker(s))" in lines[1] and "own thread cuvil-io-out" in lines[2]
    # after the run: what took effect where (the io threads got CPU 0, nothing else was asked)
    outcomes = dict(group.split(" -> ") for group in
                    threads.removeprefix("threads: ").split(" | "))
    assert sorted(outcomes["default scheduler; CPUs 0"].split(", ")) == ["cuvil-io-out",
                                                                        "cuvil-io-src"]
    assert "cuvil-compute_0" in outcomes["default scheduler"]
    assert "scheduler (" in outcomes["default scheduler"]


def test_a_detector_session_follows_the_placement(tmp_path):
    p = Pipeline("yolo-place")
    p.add("drive", "replay", path=str(REPO / "datasets" / "sample_drive"))
    p.add("yolo", "yolo.detect", inputs={"image": "drive/image"},
          model="builtin:yolov8_cuvil_demo.onnx", runtime="onnxruntime")
    for workers in (1, 2):
        result = run_pipeline(p.validate(), RunOptions(workers=workers, frames=1,
                                                       write_record=False))
        line = next(x for x in result.placement if x.startswith("yolo"))
        threads = intra_op_threads(workers)
        assert f"onnxruntime CPU, intra-op threads {threads}, inter-op 1, no spin-wait" in line


def test_opencv_threads_follow_the_placement_for_the_block_and_are_restored():
    import cv2

    before = cv2.getNumThreads()
    with opencv_threads(1):
        assert cv2.getNumThreads() == 1
    assert cv2.getNumThreads() == before
