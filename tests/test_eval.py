"""AP computation, matching rules, and `eval` end to end through the executor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cuvil_perception.eval import (average_precision, evaluate_pipeline, iou_bev, match_frame,
                                   read_run, score_2d, score_bev)
from cuvil_perception.graph import Op, Pipeline, PortSpec, register

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "datasets" / "sample_drive"


def label(cls, box2d, box3d=(10.0, 0.0, -0.9, 3.9, 1.6, 1.5, 0.0)) -> list[float]:
    return [cls, *box3d, *box2d]


LABELS = np.array([label(0, (100, 100, 200, 180)), label(0, (300, 100, 380, 160)),
                   label(1, (500, 120, 520, 170)), label(2, (-1, -1, -1, -1))], np.float32)


def det(box, score, cls) -> list[float]:
    return [*box, score, cls]


def test_average_precision_by_hand() -> None:
    assert average_precision(np.array([True, True]), 2) == 1.0
    assert average_precision(np.zeros(0, bool), 2) == 0.0
    assert average_precision(np.array([False, False]), 2) == 0.0
    assert math.isnan(average_precision(np.array([False]), 0))
    # TP, FP, TP over 2 GT: recall .5 .5 1, precision 1 .5 .667 -> .5 * 1 + .5 * 2/3
    assert average_precision(np.array([True, False, True]), 2) == pytest.approx(5 / 6)
    assert average_precision(np.array([True, False, True]), 2, "r40") == pytest.approx(5 / 6)
    # one TP over 3 GT: all-point 1/3; R40 counts the 13 recall points <= 1/3
    assert average_precision(np.array([True]), 3) == pytest.approx(1 / 3)
    assert average_precision(np.array([True]), 3, "r40") == pytest.approx(13 / 40)
    with pytest.raises(ValueError):
        average_precision(np.array([True]), 1, "r11")


def test_match_frame_rules() -> None:
    iou = np.array([[0.9, 0.6], [0.8, 0.1], [0.0, 0.49]])
    # the best det takes GT 0; det 1 then finds GT 0 taken and GT 1 below 0.5 -> FP
    scores, hits = match_frame(np.array([0.9, 0.8, 0.7]), iou, np.array([False, False]), 0.5)
    assert list(hits) == [True, False, False]
    # a detection matching an ignored GT is dropped, not counted as a false positive
    iou = np.array([[0.9, 0.95], [0.8, 0.7], [0.0, 0.0]])
    scores, hits = match_frame(np.array([0.9, 0.8, 0.7]), iou, np.array([False, True]), 0.5)
    assert list(hits) == [True, False] and list(scores) == [0.9, 0.7]  # counted box first


def test_score_2d_perfect_none_and_partial() -> None:
    perfect = np.array([det(LABELS[i, 8:12], 0.9, LABELS[i, 0]) for i in range(3)], np.float32)
    results = score_2d([(perfect, LABELS)])
    assert [r.ap for r in results[:2]] == [1.0, 1.0] and math.isnan(results[2].ap)
    assert [r.num_gt for r in results] == [2, 1, 0]
    none = score_2d([(np.zeros((0, 6), np.float32), LABELS)])
    assert [r.ap for r in none[:2]] == [0.0, 0.0]
    # cars: a FP with the highest score, then one of the two cars found -> precision 1/2 at
    # recall 1/2: AP = 0.25; the pedestrian is found with the wrong class -> 0
    partial = np.array([det((600, 10, 650, 50), 0.95, 0), det((102, 98, 203, 181), 0.9, 0),
                        det((500, 120, 520, 170), 0.8, 2)], np.float32)
    results = score_2d([(partial, LABELS)])
    assert results[0].ap == pytest.approx(0.25)
    assert results[0].tp == 1 and results[0].num_det == 2
    assert results[1].ap == 0.0
    # ignoring small boxes: the 50 px pedestrian is don't-care below 60 px
    assert math.isnan(score_2d([(partial, LABELS)], min_height=60)[1].ap)


def test_score_bev_rotated() -> None:
    gt = np.array([label(0, (0, 0, 1, 1), (20.0, 5.0, -0.9, 4.0, 2.0, 1.5, 0.3))], np.float32)
    same = gt[:, 1:8]
    turned = same.copy()
    turned[0, 6] += np.pi / 2  # a 4 x 2 box turned by 90 degrees: IoU = 4 / 12
    assert iou_bev(same, turned)[0, 0] == pytest.approx(4 / 12, abs=1e-9)
    hit = score_bev([(same, np.array([0.8]), np.array([0]), gt)])
    assert hit[0].ap == 1.0
    miss = score_bev([(turned, np.array([0.8]), np.array([0]), gt)])
    assert miss[0].ap == 0.0 and miss[0].num_det == 1
    # outside the detector's range: ignored, and a detection on it is not a false positive
    outside = score_bev([(same, np.array([0.8]), np.array([0]), gt)], xy_range=(0, -3, 70, 3))
    assert math.isnan(outside[0].ap) and outside[0].num_det == 0


@register
class Oracle(Op):
    """Test double: turns the labels into perfect 2D detections and 3D boxes."""

    name = "evaltest.oracle"

    def input_ports(self):
        return (PortSpec("labels", "float32", (None, 12)),)

    def output_ports(self):
        return (PortSpec("detections", "float32", (None, 6)),
                PortSpec("boxes", "float32", (None, 7)), PortSpec("scores", "float32", (None,)),
                PortSpec("labels", "int32", (None,)))

    def process(self, inputs, frame):
        labels = inputs["labels"]
        seen = labels[:, 8] >= 0
        dets = np.concatenate([labels[seen, 8:12], np.full((seen.sum(), 1), 0.9, np.float32),
                               labels[seen, :1]], axis=1)
        return {"detections": dets, "boxes": labels[:, 1:8].copy(),
                "scores": np.full(len(labels), 0.8, np.float32),
                "labels": labels[:, 0].astype(np.int32)}


def oracle_pipeline(out: Path) -> Pipeline:
    p = Pipeline("oracle")
    p.add("drive", "replay", path=str(SAMPLE))
    p.add("oracle", "evaltest.oracle", inputs={"labels": "drive/labels"})
    p.add("fusion", "fusion.associate", inputs={
        "boxes": "oracle/boxes", "scores": "oracle/scores", "labels": "oracle/labels",
        "detections": "oracle/detections", "P2": "drive/P2", "R0_rect": "drive/R0_rect",
        "Tr_velo_to_cam": "drive/Tr_velo_to_cam", "image": "drive/image"})
    p.add("log", "jsonl", inputs={"objects": "fusion/objects"}, path=str(out))
    return p


def test_evaluate_pipeline_with_an_oracle_scores_one(sample_drive, tmp_path) -> None:
    report = evaluate_pipeline(oracle_pipeline(tmp_path / "user.jsonl"), frames=4)
    assert report.frames == 4
    assert not (tmp_path / "user.jsonl").exists()  # the pipeline's own sinks do not run
    two_d, bev = report.score("fusion", "2d"), report.score("fusion", "bev")
    for cls in ("car", "pedestrian", "cyclist"):
        assert two_d.ap(cls) == pytest.approx(1.0)
        assert bev.ap(cls) == pytest.approx(1.0)
    labels = [np.asarray(json.loads(p.read_text())["objects"])
              for p in sorted((sample_drive / "labels").glob("*.json"))[:4]]
    assert sum(r.num_gt for r in bev.classes) == sum(len(x) for x in labels)
    doc = report.as_dict()
    assert doc["interpolation"] == "all" and doc["results"][0]["classes"][0]["ap"] == 1.0


def test_eval_command_writes_json(sample_drive, tmp_path) -> None:
    from cuvil_perception.cli.eval_cmd import eval_cmd

    outs = [tmp_path / "scores.json", tmp_path / "again.json"]
    for out in outs:  # the same input twice: the same --out bytes (times go to .timing.json)
        result = CliRunner().invoke(eval_cmd, [
            str(REPO / "configs" / "fusion.yaml"), "--replay", str(sample_drive), "--frames", "2",
            "--out", str(out)])
        assert result.exit_code == 0, result.output
    out = outs[0]
    assert out.read_bytes() == outs[1].read_bytes()
    timing = json.loads((tmp_path / "scores.timing.json").read_text())
    assert timing["format"] == "cuvil-eval-timing/1" and timing["scores"] == "scores.json"
    assert set(timing["stage_p50_ms"]) == {"yolo", "pillars", "fusion"}
    assert "pedestrian" in result.output and "BEV" in result.output
    doc = json.loads(out.read_text())
    assert doc["frames"] == 2
    assert {(r["stage"], r["metric"]) for r in doc["results"]} == {
        ("yolo", "2d"), ("pillars", "bev"), ("fusion", "2d"), ("fusion", "bev")}
    assert all(0.0 <= c["ap"] <= 1.0 for r in doc["results"] for c in r["classes"])


def test_eval_without_labels_is_a_usage_error(tmp_path) -> None:
    from cuvil_perception.errors import UsageError
    from cuvil_perception.drives.synth import make_drive

    make_drive(tmp_path / "d", 1, seed=3)
    import shutil
    shutil.rmtree(tmp_path / "d" / "labels")
    p = oracle_pipeline(tmp_path / "x.jsonl")
    p.stage("drive").params["path"] = str(tmp_path / "d")
    with pytest.raises(UsageError, match="no labels"):
        evaluate_pipeline(p)


def test_read_run_decodes_nan(tmp_path) -> None:
    line = {"frame": 3, "timestamp_ns": 5, "stamps": {"points": 5}, "stale": {},
            "outputs": {"a": {"dtype": "float32", "shape": [1, 2], "data": [["NaN", 1.5]]},
                        "b": {"dtype": "int32", "shape": [0], "data": []},
                        "c": {"dtype": "float32", "shape": [9999], "sha256": "00"}}}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(line) + "\n")
    frame = read_run(path)[0]
    assert frame.index == 3 and np.isnan(frame.outputs["a"][0, 0])
    assert frame.outputs["a"][0, 1] == 1.5 and frame.outputs["b"].shape == (0,)
    assert frame.outputs["c"] is None


def test_compare_model_takes_builtin_names_like_quantize() -> None:
    """``--compare-model STAGE=builtin:NAME`` resolves through the one model-path resolver
    (`graph.model_file`, also quantize's MODEL): the shipped file, or one line naming the option."""
    from cuvil_perception.errors import UsageError
    from cuvil_perception.eval import parse_swaps
    from cuvil_perception.graph import builtin_models_dir, load_pipeline

    pipeline = load_pipeline(REPO / "configs" / "lidar_pillars.yaml", validate=False)
    swaps = parse_swaps(("detect=builtin:pointpillars_cuvil_demo.int8.onnx",), pipeline)
    assert swaps == {"detect": builtin_models_dir() / "pointpillars_cuvil_demo.int8.onnx"}
    with pytest.raises(UsageError, match=r"^--compare-model detect=builtin:nope.onnx: no bundled "
                                         r"model 'nope.onnx' \(bundled: .*pointpillars"):
        parse_swaps(("detect=builtin:nope.onnx",), pipeline)
