"""Late camera-LiDAR fusion: op ``fusion.associate`` and the geometry it rests on.

Rule (what ``associate`` computes, per frame):

1. Project each 3D box (LiDAR frame: x fwd, y left, z up, metres; (x, y, z) the box centre)
   into the image: its 8 corners go through ``M = P2 @ R0_rect @ Tr_velo_to_cam`` (homogeneous,
   R0_rect padded to 4x4). A box with any corner closer than ``min_depth`` (0.1 m) to the
   camera plane is not projected (its rectangle would be meaningless); otherwise the enclosing
   rectangle of the 8 projected corners, clipped to [0, W-1] x [0, H-1], is its 2D box, unless
   the clipped rectangle is thinner than 1 px in x or y (the box is outside the image). These
   are the rules the synthetic drive generator uses for the labels' ``box2d``.
2. Associate projected boxes with camera detections greedily: repeatedly take the pair with
   the highest IoU (ties: lower 3D index, then lower 2D index) among pairs not yet used, as long
   as IoU >= ``iou_threshold``; with ``same_class`` a pair must have the same class (camera
   classes go through ``camera_classes`` first).
3. Output one row per object, float32 [N, 15] (``geometry.objects.COLUMNS``):

   - matched pair: class of the camera detection, the 3D box, the camera's 2D box, both
     scores, seen_by 3 (camera 1 | LiDAR 2);
   - unmatched 3D box: its class, the 3D box, its projected 2D box (NaN when not projected),
     score_3d, score_2d NaN, seen_by 2;
   - unmatched camera detection: its class, NaN 3D box, its 2D box, score_3d NaN, score_2d,
     seen_by 1.

   Rows: the 3D boxes in input order (by descending score from ``pillars.detect``), then the
   unmatched camera detections in input order.

The work is a few hundred rectangles per frame (microseconds in numpy), so this op has no
native kernel: the numpy code below is both the reference and the implementation.
"""

from __future__ import annotations

import numpy as np

from ..drives.labels import CLASSES
from ..geometry import iou_matrix, project_boxes, velo_to_image
from ..geometry.objects import (BOX_2D, BOX_3D, CLASS, COLUMNS, SCORE_2D, SCORE_3D, SEEN_BY,
                                SEEN_CAMERA, SEEN_LIDAR)
from ..graph import FrameInfo, Op, Param, PortSpec, Range, register
from .summary import count_by_class


def greedy_match(iou: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """Pairs (row, column) by repeatedly taking the highest remaining IoU >= threshold; ties go
    to the lower row, then the lower column. Entries < 0 never match.

    Implemented as one walk over the qualifying pairs sorted by (-IoU, row, column), skipping
    pairs whose row or column is taken: the same pairs as the repeated argmax, without
    rescanning the matrix per pair."""
    iou = np.asarray(iou, np.float64)
    rows, cols = np.nonzero((iou >= threshold) & (iou >= 0))  # row-major order
    order = np.argsort(-iou[rows, cols], kind="stable")  # stable: ties stay row-major
    used_rows, used_cols, pairs = set(), set(), []
    for k in order:
        row, col = int(rows[k]), int(cols[k])
        if row not in used_rows and col not in used_cols:
            pairs.append((row, col))
            used_rows.add(row)
            used_cols.add(col)
    return pairs


def associate(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray,
              detections: np.ndarray, matrix: np.ndarray, image_hw: tuple[int, int], *,
              iou_threshold: float = 0.3, same_class: bool = True,
              camera_classes: list[int] | None = None) -> np.ndarray:
    """Fused objects float32 [K, 15] (``COLUMNS``) from 3D boxes [N, 7] / scores [N] / labels [N]
    (LiDAR frame) and camera detections [M, 6] (x1, y1, x2, y2, score, class; pixels).

    ``matrix`` is ``velo_to_image(...)``; ``camera_classes[c]`` maps camera class c to the fused
    class (-1 drops the detection; None: identity). The rule is in the module docstring."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 7)
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    scores = np.asarray(scores, np.float32).reshape(-1)
    dets, det_cls = _camera_rows(detections, camera_classes)
    rects = project_boxes(boxes, matrix, image_hw)
    iou = iou_matrix(rects, dets[:, :4])
    if same_class:
        iou[labels[:, None] != det_cls[None, :]] = -1.0
    pairs = dict(greedy_match(iou, iou_threshold))
    rows = np.full((len(boxes) + len(dets), len(COLUMNS)), np.nan, np.float32)
    rows[:len(boxes), CLASS] = labels
    rows[:len(boxes), BOX_3D] = boxes
    rows[:len(boxes), BOX_2D] = rects
    rows[:len(boxes), SCORE_3D] = scores
    rows[:len(boxes), SEEN_BY] = SEEN_LIDAR
    for i, j in pairs.items():
        rows[i, CLASS] = det_cls[j]
        rows[i, BOX_2D] = dets[j, :4]
        rows[i, SCORE_2D] = dets[j, 4]
        rows[i, SEEN_BY] = SEEN_LIDAR | SEEN_CAMERA
    # A mask, not np.setdiff1d: that imports numpy.ma on its first call (~12 ms of frame 0's
    # fusion, on its end-to-end path, AMD EPYC Zen 4 AVX-512 VNNI).
    matched = np.zeros(len(dets), bool)
    matched[list(pairs.values())] = True
    alone = np.flatnonzero(~matched)
    tail = rows[len(boxes):len(boxes) + len(alone)]
    tail[:, CLASS] = det_cls[alone]
    tail[:, BOX_2D] = dets[alone, :4]
    tail[:, SCORE_2D] = dets[alone, 4]
    tail[:, SEEN_BY] = SEEN_CAMERA
    return rows[:len(boxes) + len(alone)]


def _camera_rows(detections: np.ndarray, camera_classes) -> tuple[np.ndarray, np.ndarray]:
    """Camera detections [M, 6] and their fused classes [M], dropping unmapped classes."""
    dets = np.asarray(detections, np.float32).reshape(-1, 6)
    cls = dets[:, 5].astype(np.int64)
    if camera_classes is None:
        return dets, cls
    table = np.asarray(camera_classes, np.int64)
    mapped = np.where((cls >= 0) & (cls < len(table)), table[np.clip(cls, 0, len(table) - 1)], -1)
    keep = mapped >= 0
    return dets[keep], mapped[keep]


@register
class FusionAssociate(Op):
    """Associate LiDAR 3D boxes with camera 2D detections by IoU of the projected box."""

    name = "fusion.associate"
    tag = "compute"
    doc = ("Late camera-LiDAR fusion: project 3D boxes with P2 @ R0_rect @ Tr_velo_to_cam, "
           "greedy max-IoU association with 2D detections; fused objects [N, 15].")
    params = (
        Param("iou_threshold", float, 0.3,
              doc="a projected 3D box and a 2D detection pair up when IoU >= this",
              range=Range(0.0, 1.0, low_open=True)),
        Param("same_class", bool, True, doc="only pair boxes of the same class"),
        Param("camera_classes", list, None, optional=True, item_type=int,
              doc="camera class index -> fused class (-1 drops it); null: identity. COCO "
                  "models: car 2 -> 0, person 0 -> 1, bicycle 1 -> 2",
              range=Range(-1, 9999), min_items=1),
    )

    def input_ports(self) -> tuple[PortSpec, ...]:
        return (
            PortSpec("boxes", "float32", (None, 7),
                     "3D boxes x, y, z, dx, dy, dz, heading (LiDAR frame, m, rad)"),
            PortSpec("scores", "float32", (None,), "3D box scores"),
            PortSpec("labels", "int32", (None,), "3D box classes, 0-based"),
            PortSpec("detections", "float32", (None, 6),
                     "2D detections x1, y1, x2, y2 (pixels), score, class"),
            PortSpec("P2", "float64", (3, 4), "rectified camera-0 coords -> image_02 pixels"),
            PortSpec("R0_rect", "float64", (3, 3), "rectifying rotation of camera 0"),
            PortSpec("Tr_velo_to_cam", "float64", (3, 4), "velodyne -> camera 0 (m)"),
            PortSpec("image", "uint8", (None, None, 3), "the camera image (only its size is used)"),
        )

    def output_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("objects", "float32", (None, len(COLUMNS)),
                         "fused objects: " + " ".join(COLUMNS) +
                         " (3D box in the LiDAR frame; NaN where a sensor did not see it; "
                         "seen_by 1 camera | 2 LiDAR)"),)

    summary_port = "objects"
    roles = {"objects": "objects"}

    def summarize(self, port: str, objects: np.ndarray) -> str:
        """``N: k car, ... (m both)`` — classes as the LiDAR detector numbers them."""
        if port != "objects" or objects.ndim != 2 or not len(objects):
            return str(len(objects))
        both = int(np.sum(objects[:, SEEN_BY] == (SEEN_CAMERA | SEEN_LIDAR)))
        return f"{len(objects)}: {count_by_class(objects[:, CLASS], CLASSES)} ({both} both)"

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        matrix = velo_to_image(inputs["P2"], inputs["R0_rect"], inputs["Tr_velo_to_cam"])
        objects = associate(inputs["boxes"], inputs["scores"], inputs["labels"],
                            inputs["detections"], matrix, inputs["image"].shape[:2],
                            iou_threshold=self.p["iou_threshold"],
                            same_class=self.p["same_class"],
                            camera_classes=self.p.get("camera_classes"))
        return {"objects": objects}
