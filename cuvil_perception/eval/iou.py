"""IoU matrices for evaluation: image rectangles and rotated bird's-eye-view boxes."""

from __future__ import annotations

import numpy as np

from ..geometry import box_table, iou_matrix, iou_rows, may_overlap


def iou_2d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU float64 [K, G] of image rectangles a [K, >=4], b [G, >=4] (x1, y1, x2, y2 pixels);
    area (x2 - x1) * (y2 - y1), as ultralytics computes it."""
    return iou_matrix(np.asarray(a)[:, :4], np.asarray(b)[:, :4])


def iou_bev(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotated BEV IoU float64 [K, G] of boxes a [K, 7], b [G, 7] (x, y, z, dx, dy, dz, heading,
    LiDAR frame): the same polygon clipping as the PointPillars NMS (OpenPCDet ``iou_bev``).
    Pairs whose bounding circles are apart are skipped (IoU 0)."""
    a = np.asarray(a, np.float64).reshape(-1, 7)
    b = np.asarray(b, np.float64).reshape(-1, 7)
    out = np.zeros((len(a), len(b)))
    if not len(a) or not len(b):
        return out
    table = box_table(np.concatenate([a, b]))
    others = np.arange(len(a), len(a) + len(b))
    for i in range(len(a)):
        for j in others[may_overlap(table, i, others)]:
            out[i, j - len(a)] = iou_rows(table[i], table[j])
    return out
