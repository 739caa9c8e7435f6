"""The shipped demo models: they load through the public from_onnx paths like any user's model,
and keep an AP floor on a drive none of them saw (generated here with a seed outside the
training and validation ranges of training/make_data.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.eval import evaluate_pipeline
from cuvil_perception.graph import apply_cli_sources, builtin_models_dir, load_pipeline
from cuvil_perception.ops.pillars import PointPillars
from cuvil_perception.ops.yolo import YoloV8

REPO = Path(__file__).resolve().parents[1]
HELD_OUT_SEED = 4242
FRAMES = 10
# Floors sit well below what the shipped models score on this drive (see MODEL_CARD.md) so that
# noise never trips them, and far above what an untrained model scores (0.0).
FLOORS = {("yolo", "2d"): 0.6, ("pillars", "bev"): 0.6, ("fusion", "2d"): 0.6,
          ("fusion", "bev"): 0.6}


@pytest.mark.parametrize("name", ["yolov8_cuvil_demo.onnx", "yolov8_cuvil_demo.int8.onnx"])
def test_yolo_demo_model_loads_and_is_cut_for_the_native_head(name):
    model = YoloV8.from_onnx(builtin_models_dir() / name)
    assert model.cut, model.fallback_reason
    image = np.full((375, 1242, 3), 114, np.uint8)
    assert model.detect(image).shape[1] == 6


@pytest.mark.parametrize("name", ["pointpillars_cuvil_demo.onnx",
                                  "pointpillars_cuvil_demo.int8.onnx"])
def test_pillars_demo_model_loads_through_from_onnx(name):
    model = PointPillars.from_onnx(builtin_models_dir() / name).open()
    assert [note.split(":")[0] for note in model.notes[:2]] == ["sparse", "sparse"]
    boxes, scores, labels = model.detect(np.zeros((0, 4), np.float32))
    assert boxes.shape == (0, 7) and scores.shape == (0,) and labels.shape == (0,)


@pytest.fixture(scope="module")
def held_out_report(tmp_path_factory):
    drive = tmp_path_factory.mktemp("held_out") / "drive"
    make_drive(drive, FRAMES, HELD_OUT_SEED)
    pipeline = load_pipeline(REPO / "configs" / "fusion.yaml", validate=False)
    apply_cli_sources(pipeline, replay=drive)
    return evaluate_pipeline(pipeline.validate())


@pytest.mark.parametrize("stage, metric", sorted(FLOORS))
def test_ap_floor_on_a_held_out_drive(held_out_report, stage, metric):
    score = held_out_report.score(stage, metric)
    assert held_out_report.frames == FRAMES
    assert score.mean_ap >= FLOORS[(stage, metric)], score.as_dict()
    assert score.ap("car") >= FLOORS[(stage, metric)], score.as_dict()
