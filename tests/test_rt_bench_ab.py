"""`bench A --vs B`: the A/B board (both sides interleaved, per-stage p50/p99, frames/s, peak
RSS, B/A ratios, side-by-side plot). Correctness only: no absolute milliseconds."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest
from click.testing import CliRunner

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.cli.app import cli
from cuvil_perception.graph import load_pipeline
from cuvil_perception.rt import compare_pipelines

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"  # 8 frames

PIPELINE = """\
pipeline: tiny
stages:
  - {id: src, op: test.scripted, params: {frames: 5, n: 64}}
  - {id: work, op: test.work, inputs: {x: src/value}, params: {reps: 2}}
  - {id: out, op: test.lines, inputs: {y: work/y}, params: {path: out.jsonl}}
"""


def _rows(output: str) -> dict[str, list[str]]:
    """The A/B table's body rows: {first cell: the other cells}."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│")[1:-1]]
        if cells and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def _check_ratio(a: str, b: str, ratio: str) -> None:
    if a == "-" or b == "-" or float(a) == 0:  # no /proc reset, or A printed as 0
        assert ratio == "-", (a, b, ratio)
        return
    assert float(ratio) == pytest.approx(float(b) / float(a), abs=0.0051), (a, b, ratio)


def test_ab_runs_interleave_and_count_frames(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(PIPELINE)
    a = load_pipeline(path)
    b = load_pipeline(path)
    b.stage("work").params["reps"] = 4
    side_a, side_b = compare_pipelines(a.validate(), b.validate(), repeat=3)
    assert len(side_a.runs) == len(side_b.runs) == 3
    assert side_a.frames == side_b.frames == 15
    assert side_a.report.row("work").frames == side_b.report.row("work").frames == 15
    starts = [run.t0_ns for pair in zip(side_a.runs, side_b.runs) for run in pair]
    assert starts == sorted(starts)  # A, B, A, B, A, B
    assert side_a.fps > 0 and side_b.fps > 0
    assert side_a.peak_rss_mb is None or side_a.peak_rss_mb > 1
    assert side_b.rss_growth_mb is None or 0 <= side_b.rss_growth_mb < side_b.peak_rss_mb
    assert not (tmp_path / "out.jsonl").exists()  # sinks write into bench's scratch folder


def test_bench_vs_on_the_sample_drive_prints_both_columns_and_ratios(tmp_path):
    pipeline = REPO / "configs" / "lidar_pillars.yaml"
    result = CliRunner().invoke(cli, [
        "bench", str(pipeline), "--replay", str(DRIVE), "--vs-set", "detect.sparse=false",
        "--repeat", "2", "--frames", "3", "--plot", str(tmp_path / "plots")])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert rows["stage"][:6] == ["A p50", "B p50", "B/A", "A p99", "B p99", "B/A"]
    for stage in ("drive", "detect", "log", "e2e"):
        a50, b50, r50, a99, b99, r99 = rows[stage]
        _check_ratio(a50, b50, r50)
        _check_ratio(a99, b99, r99)
    assert rows["frames"][:3] == ["6", "6", "1.00"]  # 3 frames x 2 repeats each side
    for name in ("frames/s", "peak RSS MiB", "RSS growth MiB"):
        _check_ratio(*rows[name][:3])
    assert "detect.sparse=false" in result.output
    image = cv2.imread(str(tmp_path / "plots" / "ab_histogram.png"))
    assert image is not None and image.shape[1] > 1800 and image.std() > 0


def test_bench_vs_file_and_vs_model(tmp_path):
    pipeline = REPO / "configs" / "lidar_pillars.yaml"
    b = tmp_path / "dense.yaml"
    text = pipeline.read_text().replace("sparse: true ", "sparse: false")
    b.write_text(text.replace("path: ../datasets", f"path: {REPO}/datasets"))
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", str(pipeline), "--replay", str(DRIVE), "--vs", str(b),
                                 "--vs-model", "detect=builtin:pointpillars_cuvil_demo.int8.onnx",
                                 "--frames", "2"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert rows["frames"][:3] == ["2", "2", "1.00"]
    assert "dense.yaml with detect=builtin:pointpillars_cuvil_demo.int8.onnx" in \
        " ".join(result.output.split())
