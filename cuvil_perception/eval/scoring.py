"""Score detector outputs against a drive's labels: 2D AP per class and rotated BEV AP.

Ground truth comes from the replay ``labels`` output, float32 [M, 12] rows ``class_id, x, y, z,
dx, dy, dz, heading, x1, y1, x2, y2`` (see ``drives.labels``):

- 2D: objects with a box in the image (x1 >= 0). Objects shorter than ``min_height`` pixels are
  ignored (don't-care, as KITTI does below 25 px); 0 keeps all.
- BEV: every labelled object; those whose centre lies outside the detector's x/y range (its
  op's ``bev_range``, e.g. ``pillars.detect``'s ``point_cloud_range``) are ignored, since it
  cannot see them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..drives.labels import CLASSES
from ..geometry import objects as O
from .ap import ClassAP, evaluate, mean_ap
from .iou import iou_2d, iou_bev

METRICS = {"2d": "2D AP (image boxes)", "bev": "BEV AP (rotated IoU, LiDAR frame)"}


@dataclass
class StageScore:
    """The AP table of one detector stage for one metric (``"2d"`` or ``"bev"``)."""

    stage: str
    op: str
    metric: str
    classes: list[ClassAP]

    @property
    def mean_ap(self) -> float:
        return mean_ap(self.classes)

    def ap(self, name: str) -> float:
        """AP of the class called ``name`` (NaN when it has no ground truth)."""
        for result in self.classes:
            if result.name == name:
                return result.ap
        raise KeyError(name)

    def as_dict(self) -> dict:
        value = self.mean_ap
        return {"stage": self.stage, "op": self.op, "metric": self.metric,
                "mAP": None if np.isnan(value) else round(value, 6),
                "classes": [c.as_dict() for c in self.classes]}


def gt_2d(labels: np.ndarray, min_height: float = 0.0):
    """(boxes [G, 4], classes [G], ignored [G]) of the labels that have an image box."""
    labels = np.asarray(labels, np.float32).reshape(-1, 12)
    rows = labels[labels[:, 8] >= 0]
    ignored = (rows[:, 11] - rows[:, 9]) < min_height
    return rows[:, 8:12], rows[:, 0].astype(np.int64), ignored


def gt_bev(labels: np.ndarray, xy_range: tuple | None = None):
    """(boxes [G, 7], classes [G], ignored [G]); ``xy_range`` = (x_min, y_min, x_max, y_max)."""
    labels = np.asarray(labels, np.float32).reshape(-1, 12)
    boxes = labels[:, 1:8]
    ignored = np.zeros(len(labels), bool)
    if xy_range is not None:
        x0, y0, x1, y1 = xy_range
        inside = (boxes[:, 0] >= x0) & (boxes[:, 0] < x1) & (boxes[:, 1] >= y0) & \
            (boxes[:, 1] < y1)
        ignored = ~inside
    return boxes, labels[:, 0].astype(np.int64), ignored


def score_2d(frames: list[tuple[np.ndarray, np.ndarray]], iou_threshold: float = 0.5,
             method: str = "all", min_height: float = 0.0) -> list[ClassAP]:
    """2D AP per class; ``frames`` = [(detections [K, 6] x1 y1 x2 y2 score class, labels)]."""
    prepared = []
    for dets, labels in frames:
        dets = np.asarray(dets, np.float32).reshape(-1, 6)
        prepared.append((dets[:, :4], dets[:, 4], dets[:, 5]) + gt_2d(labels, min_height))
    return evaluate(prepared, iou_2d, CLASSES, iou_threshold, method)


def score_bev(frames: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
              iou_threshold: float = 0.5, method: str = "all", xy_range: tuple | None = None,
              classes: tuple[int, ...] | None = None) -> list[ClassAP]:
    """BEV AP per class; ``frames`` = [(boxes [K, 7], scores [K], classes [K], labels)]."""
    prepared = []
    for boxes, scores, cls, labels in frames:
        boxes = np.asarray(boxes, np.float32).reshape(-1, 7)
        prepared.append((boxes, np.asarray(scores).reshape(-1), np.asarray(cls).reshape(-1))
                        + gt_bev(labels, xy_range))
    return evaluate(prepared, iou_bev, CLASSES, iou_threshold, method, classes)


def fused_as_2d(objects: np.ndarray) -> np.ndarray:
    """Fused objects [N, 15] -> detections [K, 6] of the rows with an image box; score = the
    larger of score_2d and score_3d (whichever sensors saw it)."""
    objects = np.asarray(objects, np.float32).reshape(-1, len(O.COLUMNS))
    rows = objects[np.isfinite(objects[:, O.BOX_2D.start])]
    score = np.fmax(rows[:, O.SCORE_2D], rows[:, O.SCORE_3D])
    return np.concatenate([rows[:, O.BOX_2D], score[:, None], rows[:, O.CLASS:O.CLASS + 1]],
                          axis=1)


def fused_as_bev(objects: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fused objects [N, 15] -> (boxes [K, 7], score_3d [K], classes [K]) of LiDAR-seen rows."""
    objects = np.asarray(objects, np.float32).reshape(-1, len(O.COLUMNS))
    rows = objects[np.isfinite(objects[:, O.BOX_3D.start])]
    return rows[:, O.BOX_3D], rows[:, O.SCORE_3D], rows[:, O.CLASS].astype(np.int64)
