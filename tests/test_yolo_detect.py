"""YoloV8.detect against ultralytics' predict() results; the yolo.detect op and its pipeline."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.errors import InputError, PipelineError
from cuvil_perception.graph import FrameInfo, RunContext, load_pipeline, lookup
from cuvil_perception.ops.yolo import YoloV8

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "yolov8"
BUNDLED = ROOT / "cuvil_perception" / "models" / "yolov8_tiny_random_640.onnx"
needs_data = pytest.mark.skipif(not (DATA / "yolov8n_random.onnx").is_file(),
                                reason="shared/data/yolov8 not present")


def pairwise_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:4], b[None, :, 2:4])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / (area(a)[:, None] + area(b)[None] - inter)


def matched_fraction(want: np.ndarray, got: np.ndarray) -> float:
    """Share of ``want`` rows with a ``got`` row of the same class, IoU > 0.99, score +-1e-3."""
    iou = pairwise_iou(want, got)
    same = (want[:, None, 5] == got[None, :, 5]) & (np.abs(want[:, None, 4] - got[None, :, 4])
                                                     < 1e-3)
    return float(((iou > 0.99) & same).any(axis=1).mean())


@needs_data
@pytest.mark.parametrize("runtime", ["opencv", "onnxruntime"])
def test_detect_matches_ultralytics_predict(runtime):
    expected = np.load(DATA / "expected_ultralytics.npz")
    det = YoloV8.from_onnx(DATA / "yolov8n_random.onnx", conf=0.25, iou=0.7, runtime=runtime)
    assert det.cut and det.fallback_reason is None
    for name in ("bus", "street"):
        image = cv2.imread(str(DATA / f"{name}.jpg"))
        rows = det.detect(image)
        want = expected[f"{name}_detect"]
        assert rows.dtype == np.float32 and rows.shape[1] == 6
        assert np.all(np.diff(rows[:, 4]) <= 0)
        assert abs(len(rows) - len(want)) <= 0.02 * len(want)
        assert matched_fraction(want, rows) >= 0.98
        assert set(det.timings_ms) == {"letterbox", "trunk", "head"}


def test_detect_rejects_bad_images():
    det = YoloV8.from_onnx(BUNDLED)
    with pytest.raises(InputError, match="uint8"):
        det.detect(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(InputError, match=r"\[H, W, 3\]"):
        det.detect(np.zeros((10, 10), np.uint8))


def test_op_runs_on_a_frame():
    cls = lookup("yolo.detect")
    assert cls is not None
    op = cls({"model": BUNDLED, "conf": 0.25, "iou": 0.7, "max_det": 300, "max_nms": 30000,
              "classes": None, "agnostic": False, "runtime": "opencv"}, {})
    assert [p.name for p in op.input_ports()] == ["image"]
    assert op.output_ports()[0].shape == (None, 6)
    assert [k.name for k in op.kernels()] == ["yolo.scan", "yolo.decode", "yolo.nms"]
    op.open(RunContext())
    image = cv2.imread(str(ROOT / "datasets" / "sample_drive" / "image_02" / "data" /
                           "0000000000.png"))
    out = op.process({"image": image}, FrameInfo(0, 0))["detections"]
    assert out.dtype == np.float32 and out.ndim == 2 and out.shape[1] == 6 and len(out) > 0
    assert op.output_ports()[0].check_value(out) is None
    op.close()


def test_camera_yolo_config_validates(tmp_path):
    pipeline = load_pipeline(ROOT / "configs" / "camera_yolo.yaml")
    stage = next(s for s in pipeline.stages if s.op == "yolo.detect")
    assert Path(stage.resolved_params["model"]).is_file()
    bad = (ROOT / "configs" / "camera_yolo.yaml").read_text().replace("iou: 0.7", "iou: 1.7")
    (tmp_path / "bad.yaml").write_text(bad)
    with pytest.raises(PipelineError, match="iou"):
        load_pipeline(tmp_path / "bad.yaml")
