"""The numpy reference against ultralytics' own results, and rule by rule on hand-made cases."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.errors import ConfigError
from cuvil_perception.ops.yolo import postprocess, reference

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "yolov8"
needs_data = pytest.mark.skipif(not (DATA / "expected_ultralytics.npz").is_file(),
                                reason="shared/data/yolov8 not present")


@pytest.fixture(scope="module")
def expected():
    return np.load(DATA / "expected_ultralytics.npz")


@needs_data
@pytest.mark.parametrize("name", ["bus", "street"])
def test_letterbox_matches_ultralytics(expected, name):
    image = cv2.imread(str(DATA / f"{name}.jpg"))
    blob = reference.letterbox(image, 640)
    assert blob.dtype == np.float32 and blob.shape == (1, 3, 640, 640)
    np.testing.assert_array_equal(blob, expected[f"{name}_letterboxed"])


@needs_data
@pytest.mark.parametrize("name", ["bus", "street"])
def test_postprocess_matches_ultralytics_nms(expected, name):
    rows = postprocess(expected[f"{name}_output0"], conf=0.25, iou=0.7, max_det=300)
    want = expected[f"{name}_nms"]
    assert rows.shape == want.shape
    np.testing.assert_array_equal(rows[:, 5], want[:, 5])
    np.testing.assert_allclose(rows[:, :4], want[:, :4], rtol=0, atol=1e-3)
    np.testing.assert_allclose(rows[:, 4], want[:, 4], rtol=0, atol=1e-5)


@needs_data
@pytest.mark.parametrize("name", ["bus", "street"])
def test_scale_boxes_matches_ultralytics_detect(expected, name):
    image = cv2.imread(str(DATA / f"{name}.jpg"))
    rows = reference.scale_boxes((640, 640), expected[f"{name}_nms"].copy(), image.shape[:2])
    np.testing.assert_allclose(rows, expected[f"{name}_detect"], rtol=0, atol=1e-3)


def test_letterbox_geometry_rounding():
    # 1242x375 into 640: new 640x193, dh = 223.5 -> top round(223.4) = 223, bottom 224
    assert reference.letterbox_geometry((375, 1242), 640) == ((640, 193), (223, 224, 0, 0))
    # already the right size: no resize, no padding
    image = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    np.testing.assert_array_equal(reference.letterbox_image(image, 64), image)
    blob = reference.letterbox(image, 64)
    np.testing.assert_array_equal(blob[0, 0], image[..., 2].astype(np.float32) / np.float32(255))


# -- hand-made cases: output0 columns are (cx, cy, w, h, scores...) -------------------------------
def make_output(boxes_xyxy, scores):
    """output0 [1, 4 + nc, A] from xyxy boxes [A, 4] and class scores [A, nc]."""
    b = np.asarray(boxes_xyxy, np.float32)
    xywh = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2,
                     b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], axis=1)
    return np.concatenate([xywh, np.asarray(scores, np.float32)], axis=1).T[None].copy()


def test_conf_is_strict_on_the_best_class_score():
    out = make_output([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]],
                      [[0.25, 0.1], [0.1, np.nextafter(np.float32(0.25), 1)], [0.2, 0.24]])
    rows = postprocess(out, conf=0.25)
    assert rows.shape == (1, 6) and rows[0, 5] == 1 and rows[0, 0] == 20


def test_iou_is_strict():
    # IoU exactly 0.5: inter 2, union 4
    out = make_output([[0, 0, 3, 1], [1, 0, 4, 1]], [[0.9], [0.8]])
    assert len(postprocess(out, iou=0.5)) == 2
    assert len(postprocess(out, iou=np.nextafter(0.5, 0))) == 1


def test_class_offset_is_max_wh_times_class():
    same = make_output([[0, 0, 10, 10], [0, 0, 10, 10]], [[0.9, 0.0], [0.0, 0.8]])
    assert len(postprocess(same)) == 2  # different classes never suppress each other
    assert len(postprocess(same, agnostic=True)) == 1
    # ultralytics shifts class c by c * 7680 on every coordinate: a class-0 box sitting at
    # 7680 overlaps a class-1 box at 0 after the shift, and is suppressed (rule kept literally).
    shifted = make_output([[7680, 7680, 7690, 7690], [0, 0, 10, 10]], [[0.8, 0.0], [0.0, 0.9]])
    rows = postprocess(shifted)
    assert rows.shape == (1, 6) and rows[0, 5] == 1


def test_max_det_and_order_by_score_then_anchor_index():
    boxes = [[20 * i, 0, 20 * i + 10, 10] for i in range(5)]
    scores = [[0.5], [0.9], [0.5], [0.7], [0.5]]
    rows = postprocess(make_output(boxes, scores), max_det=4)
    np.testing.assert_array_equal(rows[:, 0], [20, 60, 0, 40])  # ties: lower anchor first
    np.testing.assert_array_equal(rows[:, 4], np.float32([0.9, 0.7, 0.5, 0.5]))


def test_best_class_ties_take_the_lower_class_and_classes_filter():
    out = make_output([[0, 0, 10, 10], [20, 0, 30, 10]], [[0.6, 0.6, 0.1], [0.1, 0.2, 0.7]])
    rows = postprocess(out)
    np.testing.assert_array_equal(rows[:, 5], [2, 0])
    np.testing.assert_array_equal(postprocess(out, classes=[2])[:, 5], [2])
    assert postprocess(out, classes=[1]).shape == (0, 6)  # the filter applies to the best class


def test_max_nms_keeps_the_top_scores():
    boxes = [[20 * i, 0, 20 * i + 10, 10] for i in range(4)]
    rows = postprocess(make_output(boxes, [[0.3], [0.9], [0.4], [0.8]]), max_nms=2)
    np.testing.assert_array_equal(rows[:, 0], [20, 60])


def test_empty_and_option_checks():
    out = make_output([[0, 0, 10, 10]], [[0.1]])
    assert postprocess(out).shape == (0, 6)
    with pytest.raises(ConfigError, match="conf"):
        postprocess(out, conf=1.5)
    with pytest.raises(ConfigError, match="iou"):
        postprocess(out, iou=-0.1)
