"""fusion.associate: projection, greedy association and the fused-object rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives import Drive
from cuvil_perception.graph import FrameInfo, Pipeline
from cuvil_perception.geometry import box_corners, iou_matrix, project_boxes, velo_to_image
from cuvil_perception.ops.fusion import (COLUMNS, SEEN_CAMERA, SEEN_LIDAR, FusionAssociate,
                                         associate, greedy_match)

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive"
HW = (375, 1242)
# A pinhole camera looking along +x of the LiDAR frame (camera z = LiDAR x, camera x = -y,
# camera y = -z), f = 700 px, principal point at the image centre.
P2 = np.array([[700.0, 0, 621, 0], [0, 700.0, 187.5, 0], [0, 0, 1, 0]])
R0 = np.eye(3)
TR = np.array([[0.0, -1, 0, 0], [0, 0, -1, 0], [1, 0, 0, 0]])
MATRIX = velo_to_image(P2, R0, TR)


def car(x: float, y: float) -> np.ndarray:
    return np.array([x, y, -0.9, 3.9, 1.6, 1.56, 0.0], np.float32)


def test_box_corners_are_the_box() -> None:
    corners = box_corners(np.array([[1.0, 2.0, 3.0, 4.0, 2.0, 1.0, np.pi / 2]]))[0]
    assert corners.shape == (8, 3)
    np.testing.assert_allclose(corners.mean(axis=0), [1, 2, 3], atol=1e-12)
    # heading pi/2: the length (4 m) lies along y
    np.testing.assert_allclose(np.ptp(corners, axis=0), [2, 4, 1], atol=1e-12)


def test_projection_of_a_box_ahead() -> None:
    rect = project_boxes(car(20.0, 0.0)[None], MATRIX, HW)[0]
    # nearest face at x = 18.05 m, half width 0.8 m -> 700 * 0.8 / 18.05 = 31.0 px each side
    assert rect[0] == pytest.approx(621 - 700 * 0.8 / 18.05, abs=1e-3)
    assert rect[2] == pytest.approx(621 + 700 * 0.8 / 18.05, abs=1e-3)
    assert rect[3] == pytest.approx(187.5 + 700 * (0.9 + 0.78) / 18.05, abs=1e-3)


def test_boxes_behind_or_outside_are_not_projected() -> None:
    boxes = np.stack([car(-10.0, 0.0), car(1.0, 0.0), car(10.0, 60.0), car(10.0, 0.0)])
    rects = project_boxes(boxes, MATRIX, HW)
    assert np.isnan(rects[:3]).all()  # behind, straddling the camera plane, outside the image
    assert np.isfinite(rects[3]).all()
    assert (rects[3] >= 0).all() and rects[3, 2] <= HW[1] - 1 and rects[3, 3] <= HW[0] - 1


def test_matching_box_is_fused_and_distant_one_is_not() -> None:
    boxes = np.stack([car(20.0, 0.0), car(30.0, 8.0)])
    rects = project_boxes(boxes, MATRIX, HW)
    # the camera sees box 0 (slightly shifted) and something far from box 1's projection
    dets = np.array([[rects[0, 0] + 3, rects[0, 1] - 2, rects[0, 2] + 3, rects[0, 3], 0.9, 0],
                     [900, 150, 960, 200, 0.8, 0]], np.float32)
    out = associate(boxes, np.array([0.7, 0.6]), np.array([0, 0]), dets, MATRIX, HW)
    assert out.shape == (3, len(COLUMNS)) and out.dtype == np.float32
    fused, lidar_only, camera_only = out
    assert fused[14] == SEEN_CAMERA | SEEN_LIDAR
    np.testing.assert_allclose(fused[1:8], boxes[0])
    np.testing.assert_allclose(fused[8:12], dets[0, :4])
    assert fused[12] == pytest.approx(0.7) and fused[13] == pytest.approx(0.9)
    assert lidar_only[14] == SEEN_LIDAR and np.isnan(lidar_only[13])
    np.testing.assert_allclose(lidar_only[8:12], rects[1], rtol=1e-6)  # keeps its projection
    assert camera_only[14] == SEEN_CAMERA and np.isnan(camera_only[1:8]).all()
    assert np.isnan(camera_only[12]) and camera_only[13] == pytest.approx(0.8)


def test_class_and_threshold_rules() -> None:
    boxes = car(20.0, 0.0)[None]
    rect = project_boxes(boxes, MATRIX, HW)[0]
    det = np.array([[*rect, 0.9, 1]], np.float32)  # same place, class pedestrian
    out = associate(boxes, [0.5], [0], det, MATRIX, HW)
    assert list(out[:, 14]) == [SEEN_LIDAR, SEEN_CAMERA]
    out = associate(boxes, [0.5], [0], det, MATRIX, HW, same_class=False)
    assert list(out[:, 14]) == [SEEN_LIDAR | SEEN_CAMERA] and out[0, 0] == 1  # camera class
    out = associate(boxes, [0.5], [0], det, MATRIX, HW, camera_classes=[-1, 0, -1])
    assert list(out[:, 14]) == [SEEN_LIDAR | SEEN_CAMERA] and out[0, 0] == 0
    half = np.array([[rect[0], rect[1], (rect[0] + rect[2]) / 2, rect[3], 0.9, 0]], np.float32)
    assert associate(boxes, [0.5], [0], half, MATRIX, HW, iou_threshold=0.6).shape[0] == 2
    assert associate(boxes, [0.5], [0], half, MATRIX, HW, iou_threshold=0.49).shape[0] == 1


def test_greedy_takes_the_best_pair_first() -> None:
    iou = np.array([[0.5, 0.6], [0.0, 0.55]])
    assert greedy_match(iou, 0.3) == [(0, 1)]  # row 1's only partner is taken; 0.0 < 0.3
    assert greedy_match(np.array([[0.4, 0.4], [0.4, 0.4]]), 0.3) == [(0, 0), (1, 1)]
    assert greedy_match(np.zeros((0, 3)), 0.3) == []
    assert iou_matrix(np.array([[0, 0, 10, 10]]), np.array([[5, 0, 15, 10]]))[0, 0] == \
        pytest.approx(50 / 150)


def greedy_by_argmax(iou: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """The rule as written: take the global maximum (first in row-major order), repeat."""
    iou = np.array(iou, np.float64)
    pairs = []
    while iou.size:
        row, col = divmod(int(np.argmax(iou)), iou.shape[1])
        if not iou[row, col] >= threshold or iou[row, col] < 0:
            break
        pairs.append((row, col))
        iou[row, :] = -1.0
        iou[:, col] = -1.0
    return pairs


def test_greedy_walk_equals_repeated_argmax() -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        shape = tuple(rng.integers(0, 12, 2))
        iou = rng.choice([0.0, 0.2, 0.3, 0.5, 0.7, 0.9, -1.0], size=shape)  # many ties
        threshold = float(rng.choice([0.0, 0.3, 0.5]))
        assert greedy_match(iou, threshold) == greedy_by_argmax(iou, threshold), trial


def test_empty_inputs() -> None:
    out = associate(np.zeros((0, 7)), np.zeros(0), np.zeros(0, np.int32), np.zeros((0, 6)),
                    MATRIX, HW)
    assert out.shape == (0, 15)


def test_op_on_the_sample_drive_fuses_labels_with_their_own_boxes() -> None:
    if not SAMPLE.is_dir():
        pytest.skip("no bundled sample drive")
    drive = Drive(SAMPLE)
    frame = drive.read(0)
    labels = frame.labels
    in_image = labels[:, 8] >= 0
    dets = np.concatenate([labels[in_image, 8:12], np.ones((in_image.sum(), 1)),
                           labels[in_image, :1]], axis=1).astype(np.float32)
    op = FusionAssociate({"iou_threshold": 0.3, "same_class": True, "camera_classes": None}, {})
    calib = drive.calib
    out = op.process({"boxes": labels[:, 1:8], "scores": np.ones(len(labels), np.float32),
                      "labels": labels[:, 0].astype(np.int32), "detections": dets,
                      "P2": calib.P2, "R0_rect": calib.R0_rect,
                      "Tr_velo_to_cam": calib.Tr_velo_to_cam, "image": frame.image},
                     FrameInfo(0, 0))["objects"]
    fused = out[:, 14] == SEEN_CAMERA | SEEN_LIDAR
    assert fused.sum() == in_image.sum() and len(out) == len(labels)


def test_op_validates_in_a_pipeline() -> None:
    p = Pipeline("f")
    p.add("drive", "replay", path=str(SAMPLE))
    p.add("fusion", "fusion.associate", inputs={
        "boxes": "drive/labels", "scores": "drive/dropped_points", "labels": "drive/labels",
        "detections": "drive/labels", "P2": "drive/P2", "R0_rect": "drive/R0_rect",
        "Tr_velo_to_cam": "drive/Tr_velo_to_cam", "image": "drive/image"})
    from cuvil_perception.errors import PipelineError
    with pytest.raises(PipelineError):
        p.validate()  # labels [N, 12] cannot feed boxes [N, 7]
    q = Pipeline("g")
    q.add("drive", "replay", path=str(SAMPLE))
    q.add("fusion", "fusion.associate", iou_threshold=1.5)
    with pytest.raises(PipelineError, match="iou_threshold"):
        q.validate()
