"""INT8 quantisation (cuvil_perception.quantize, `quantize` and `eval --compare-model`): the int8
files keep their layout and load with the same ops, their outputs stay close to fp32, and the
verbs refuse bad input with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from cuvil_perception.drives import Drive
from cuvil_perception.ops.pillars.model import PointPillars
from cuvil_perception.ops.yolo.model import YoloV8
from cuvil_perception.quantize import frame_indices, quantize_model

from badinput._runner import assert_one_line_error, assert_unchanged, cli, snapshot

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "cuvil_perception" / "models"
DRIVE = REPO / "datasets" / "sample_drive"
PILLARS, YOLO = MODELS / "pointpillars_cuvil_demo.onnx", MODELS / "yolov8_cuvil_demo.onnx"


@pytest.fixture(scope="module")
def int8(tmp_path_factory) -> dict:
    """Both demo models quantised on 2 frames of the sample drive (~3 s)."""
    out = tmp_path_factory.mktemp("int8")
    paths = {}
    for name, model in (("pillars", PILLARS), ("yolo", YOLO)):
        data, summary = quantize_model(model, DRIVE, frames=2)
        assert summary.kind == name and summary.frames == 2
        paths[name] = out / f"{name}.int8.onnx"
        paths[name].write_bytes(data)
    return paths


def test_calibration_frames_are_spread_over_the_drive():
    assert frame_indices(100, 5) == [0, 25, 50, 74, 99]
    assert frame_indices(3, 10) == [0, 1, 2]
    assert frame_indices(8, 1) == [0]


def _ops(path: Path) -> set:
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def test_pillars_int8_keeps_the_layout_and_the_head_maps(int8):
    assert {"QuantizeLinear", "DequantizeLinear", "PPScatterPlugin"} <= _ops(int8["pillars"])
    fp32, q = PointPillars.from_onnx(PILLARS).open(), PointPillars.from_onnx(int8["pillars"]).open()
    for field in ("linear", "gamma", "beta", "mean", "var"):  # the PFN is untouched
        np.testing.assert_array_equal(getattr(fp32.split.pfn, field), getattr(q.split.pfn, field))
    points = Drive(DRIVE).read(4).points
    assert q.notes[:2] == fp32.notes[:2]  # the int8 file keeps the sparse path (fused conv, heads)
    # what ORT runs is all int8 convolutions, the class conv (split over F's parts) included
    producer = {out: n for n in q.plan.rest.graph.node for out in n.output}
    convs = [n for n in q.plan.rest.graph.node if n.op_type == "Conv"]
    assert len(convs) == 8 and len(q.plan.feat) == 2  # 5 backbone, 1x1 deblock, 2 class parts
    assert all(producer[c.input[0]].op_type == "DequantizeLinear" for c in convs)
    cls_a = fp32.runner(fp32.bev(points).copy())[0]  # (box / dir: only at candidate cells)
    cls_b = q.runner(q.bev(points).copy())[0]
    score_a, score_b = 1 / (1 + np.exp(-cls_a)), 1 / (1 + np.exp(-cls_b))
    assert np.abs(score_a - score_b).mean() < 0.01
    # every confident fp32 box has an int8 box of the same class within 0.5 m
    boxes_a, scores_a, labels_a = fp32.detect(points)
    boxes_b, _, labels_b = q.detect(points)
    # the background stays below the threshold: about as many candidate cells as fp32 (with
    # each Relu left float beside its quantised Conv, int8 gave ~80x as many)
    assert q.runner.cells <= 1.5 * fp32.runner.cells + 20, (q.runner.cells, fp32.runner.cells)
    confident = scores_a > 0.5
    assert confident.sum() >= 3
    for box, label in zip(boxes_a[confident], labels_a[confident]):
        near = np.hypot(*(boxes_b[:, :2] - box[:2]).T) < 0.5
        assert (near & (labels_b == label)).any(), box


def test_pillars_int8_file_runs_dense_with_the_same_detections(int8):
    """The file keeps the layout: run as exported (sparse: false), the float first layer and
    box / direction convs around the int8 rest give the sparse path's detections."""
    sparse = PointPillars.from_onnx(int8["pillars"]).open()
    dense = PointPillars.from_onnx(int8["pillars"], sparse=False).open()
    points = Drive(DRIVE).read(6).points
    boxes_a, scores_a, labels_a = sparse.detect(points)
    boxes_b, scores_b, labels_b = dense.detect(points)
    assert len(boxes_a) >= 3 and abs(len(boxes_a) - len(boxes_b)) <= 1
    for box, score, label in zip(boxes_a[scores_a > 0.3], scores_a, labels_a):
        near = (np.hypot(*(boxes_b[:, :2] - box[:2]).T) < 0.05) & (labels_b == label)
        assert near.any() and np.abs(scores_b[near] - score).min() < 0.01, box


def test_yolo_int8_still_has_its_head_cut_and_finds_the_same_objects(int8):
    assert {"QuantizeLinear", "DequantizeLinear"} <= _ops(int8["yolo"])
    fp32 = YoloV8.from_onnx(YOLO, runtime="onnxruntime", threads=1)
    q = YoloV8.from_onnx(int8["yolo"], runtime="onnxruntime", threads=1)
    assert q.cut and q.fallback_reason is None  # the native head still runs
    fp32.open()
    q.open()
    image = Drive(DRIVE).read(4).image
    a, b = fp32.detect(image), q.detect(image)
    assert len(a) and abs(len(a) - len(b)) <= max(2, len(a) // 5)
    # the best fp32 box is found by int8 too (same class, IoU > 0.8)
    same = b[b[:, 5] == a[0, 5]]
    x1, y1 = np.maximum(same[:, 0], a[0, 0]), np.maximum(same[:, 1], a[0, 1])
    x2, y2 = np.minimum(same[:, 2], a[0, 2]), np.minimum(same[:, 3], a[0, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda r: (r[..., 2] - r[..., 0]) * (r[..., 3] - r[..., 1])  # noqa: E731
    assert (inter / (area(same) + area(a[0]) - inter)).max() > 0.8


def test_quantize_verb_writes_once_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "pp.int8.onnx"
    result = cli("quantize", "builtin:pointpillars_cuvil_demo.onnx", "--calibrate", str(DRIVE),
                 "--frames", "1", "--out", str(out))
    assert result.code == 0, result.stderr
    assert "pillars:" in result.stdout and str(out) in result.stdout
    before = snapshot(out)
    again = cli("quantize", str(PILLARS), "--calibrate", str(DRIVE), "--out", str(out))
    assert_one_line_error(again, str(out), "--overwrite", "not-ours")
    assert_unchanged(before)


@pytest.mark.parametrize("args,fragments", [
    (["{model}", "--calibrate", "{drive}", "--out", "{model}"], ["input"]),
    (["{tmp}/none.onnx", "--calibrate", "{drive}"], ["none.onnx", "no such model file"]),
    (["builtin:nope.onnx", "--calibrate", "{drive}"], ["no bundled model 'nope.onnx'"]),
    (["{model}", "--calibrate", "{tmp}/nodrive"], ["nodrive", "no such drive folder"]),
    (["{notmodel}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx"], ["notmodel.onnx"]),
    (["{yaml}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx"], ["x.yaml"]),
    # --evaluate DRIVE: checked before the calibration starts
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate",
      "{tmp}/nodrive"], ["--evaluate", "nodrive", "no such drive folder"]),
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate", ""],
     ["--evaluate", "no such drive folder"]),
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate", "{yaml}"],
     ["--evaluate", "x.yaml", "no such drive folder"]),
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate",
      "{unlabelled}"], ["--evaluate", "unlabelled", "no labels"]),
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate", "{empty}"],
     ["--evaluate", "empty"]),
    (["{model}", "--calibrate", "{drive}", "--out", "{tmp}/o.onnx", "--evaluate"],
     ["--evaluate", "requires an argument"]),
])
def test_quantize_bad_input_is_one_line(tmp_path, args, fragments):
    model = tmp_path / "m.onnx"
    model.write_bytes(PILLARS.read_bytes())
    (tmp_path / "notmodel.onnx").write_bytes(b"\x00garbage")
    (tmp_path / "x.yaml").write_text("pipeline: x\n")
    unlabelled, empty = tmp_path / "unlabelled", tmp_path / "empty"
    shutil.copytree(DRIVE, unlabelled, ignore=shutil.ignore_patterns("labels"))
    empty.mkdir()
    values = dict(model=model, drive=DRIVE, tmp=tmp_path, notmodel=tmp_path / "notmodel.onnx",
                  yaml=tmp_path / "x.yaml", unlabelled=unlabelled, empty=empty)
    before = snapshot(tmp_path)
    result = cli("quantize", *[a.format(**values) for a in args])
    assert_one_line_error(result, *fragments)
    assert_unchanged(before)
    assert not (tmp_path / "o.onnx").exists()


def test_quantize_names_the_cpu_and_evaluate_gives_the_ap_change_and_speed(tmp_path):
    from cuvil_perception.machine_info import cpu

    out = tmp_path / "y.int8.onnx"
    result = cli("quantize", "builtin:yolov8_cuvil_demo.onnx", "--calibrate", str(DRIVE),
                 "--frames", "1", "--out", str(out), "--evaluate", str(DRIVE))
    assert result.code == 0, result.stderr
    assert "int8 weights in [-64, 63] (7-bit" in result.stdout
    assert cpu().describe() in result.stdout  # the ISA it ran on
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"evaluated on {DRIVE}: 8 frame(s)") for line in lines)
    mean = next(line for line in lines if "2D mAP@0.5" in line)
    fp32, int8, change = (float(mean.split()[i].strip("()")) for i in (3, 5, 6))
    assert 0.5 < fp32 <= 1 and abs(int8 - fp32) < 0.1 and change == pytest.approx(
        int8 - fp32, abs=0.0015)
    speed = next(line for line in lines if line.startswith("  speed:"))
    assert speed.endswith(f"on {cpu().isa}") and ("x faster" in speed or "x slower" in speed)


def test_eval_compares_the_int8_model_with_fp32_side_by_side(int8, tmp_path):
    out = tmp_path / "compare.json"
    result = cli("eval", str(REPO / "configs" / "lidar_pillars.yaml"), "--frames", "2",
                 "--compare-model", f"detect={int8['pillars']}", "--out", str(out))
    assert result.code == 0, result.stderr + result.stdout
    assert "difference" in result.stdout and "p50 ms" in result.stdout
    scores = json.loads(out.read_text())
    assert scores["format"] == "cuvil-eval-compare/1"
    assert scores["swaps"] == {"detect": str(int8["pillars"].resolve())}
    timing = json.loads((tmp_path / "compare.timing.json").read_text())
    assert timing["speed"]["detect"]["speedup"] > 0 and "speed" not in scores
    base, other = scores["base"]["results"][0], scores["other"]["results"][0]
    assert base["stage"] == other["stage"] == "detect" and abs(base["mAP"] - other["mAP"]) < 0.2


@pytest.mark.parametrize("value,fragment", [
    ("detect", "expected STAGE=MODEL.onnx"),
    ("=x.onnx", "expected STAGE=MODEL.onnx"),
    ("nosuch={model}", "no stage 'nosuch'"),
    ("log={model}", "has no model param"),
    ("detect={tmp}/missing.onnx", "no such model file"),
])
def test_eval_compare_model_bad_input(tmp_path, value, fragment):
    result = cli("eval", str(REPO / "configs" / "lidar_pillars.yaml"), "--frames", "1",
                 "--compare-model", value.format(model=PILLARS, tmp=tmp_path))
    assert_one_line_error(result, "--compare-model", fragment)
