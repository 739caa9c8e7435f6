"""Boxes and cameras: 3D box corners, the KITTI LiDAR -> image projection, projected box
rectangles and the axis-aligned 2D IoU (float64 numpy; ops, eval and viz share them).

Boxes [N, 7] are x, y, z (centre), dx, dy, dz (m), heading (rad about +z), LiDAR frame.
"""

from __future__ import annotations

import numpy as np

MIN_DEPTH = 0.1  # metres in front of the camera plane; same value as the drive generator

# Corner order of ``box_corners`` (box frame, units of the half size): bottom face then top
# face, each counter-clockwise seen from above, starting at the front-left corner.
_CORNER_SIGNS = np.array([[1, 1, -1], [1, -1, -1], [-1, -1, -1], [-1, 1, -1],
                          [1, 1, 1], [1, -1, 1], [-1, -1, 1], [-1, 1, 1]], dtype=np.float64)
BOX_EDGES = ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4),
             (0, 4), (1, 5), (2, 6), (3, 7))
"""Corner index pairs of the 12 box edges (for drawing); edges 0-1 and 4-5 are the front."""


def box_corners(boxes: np.ndarray) -> np.ndarray:
    """Corners float64 [N, 8, 3] of boxes [N, 7] (x, y, z centre, dx, dy, dz, heading about +z,
    LiDAR frame, metres / radians); order documented at ``_CORNER_SIGNS``."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 7)
    local = _CORNER_SIGNS[None] * (boxes[:, None, 3:6] / 2)
    c, s = np.cos(boxes[:, 6])[:, None], np.sin(boxes[:, 6])[:, None]
    x = local[..., 0] * c - local[..., 1] * s
    y = local[..., 0] * s + local[..., 1] * c
    return np.stack([x, y, local[..., 2]], axis=-1) + boxes[:, None, :3]


def velo_to_image(P2: np.ndarray, R0_rect: np.ndarray, Tr_velo_to_cam: np.ndarray) -> np.ndarray:
    """float64 [3, 4]: homogeneous LiDAR points -> homogeneous image_02 pixels (KITTI raw)."""
    r0 = np.eye(4)
    r0[:3, :3] = np.asarray(R0_rect, np.float64)
    tr = np.eye(4)
    tr[:3, :] = np.asarray(Tr_velo_to_cam, np.float64)
    return np.asarray(P2, np.float64) @ r0 @ tr


def project_points(points: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LiDAR points [..., 3] -> (pixels [..., 2] float64, depth [...] metres along the optical
    axis). Pixels of points at depth ~0 are meaningless; callers check the depth."""
    points = np.asarray(points, np.float64)
    homo = points @ matrix[:, :3].T + matrix[:, 3]
    depth = homo[..., 2]
    safe = np.where(np.abs(depth) < 1e-9, 1e-9, depth)
    return homo[..., :2] / safe[..., None], depth


def project_boxes(boxes: np.ndarray, matrix: np.ndarray, image_hw: tuple[int, int],
                  min_depth: float = MIN_DEPTH) -> np.ndarray:
    """Image rectangles float64 [N, 4] (x1, y1, x2, y2 pixels) of 3D boxes [N, 7] (LiDAR frame);
    NaN rows for boxes not projected (a corner within ``min_depth`` of the camera plane or
    behind it, or the clipped rectangle thinner than 1 px). See ``ops.fusion``'s rule, step 1."""
    height, width = image_hw
    corners = box_corners(boxes)
    pixels, depth = project_points(corners, matrix)
    rects = np.full((len(corners), 4), np.nan)
    if not len(corners):
        return rects
    in_front = (depth > min_depth).all(axis=1)
    low, high = pixels.min(axis=1), pixels.max(axis=1)
    x1, y1 = np.maximum(low[:, 0], 0.0), np.maximum(low[:, 1], 0.0)
    x2, y2 = np.minimum(high[:, 0], width - 1.0), np.minimum(high[:, 1], height - 1.0)
    keep = in_front & (x2 - x1 >= 1.0) & (y2 - y1 >= 1.0)
    rects[keep] = np.stack([x1, y1, x2, y2], axis=1)[keep]
    return rects


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU float64 [N, M] of axis-aligned boxes a [N, 4], b [M, 4] (x1, y1, x2, y2); area is
    (x2 - x1) * (y2 - y1) as in ultralytics; a NaN box has IoU 0 with everything."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    iy = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(ix, 0, None) * np.clip(iy, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
    return np.nan_to_num(iou, nan=0.0)
