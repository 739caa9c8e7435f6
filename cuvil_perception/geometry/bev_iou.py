"""Rotated bird's-eye-view IoU (reference, float64, plain Python).

Same quantity as OpenPCDet's iou3d_nms ``iou_bev``: overlap / max(area_a + area_b - overlap,
1e-8), the overlap being the area of the intersection polygon of the two rotated rectangles.
Here the polygon comes from Sutherland-Hodgman clipping of a's corners by b's four edges.
The native NMS kernel (ops/pillars/kernel_nms) performs the same float64 operations in the same
order on the same ``box_table`` rows, so both reach identical decisions.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-8
# Columns of a box-table row.
X, Y, AREA, RADIUS, CORNERS = 0, 1, 2, 3, 4
TABLE_WIDTH = 12
# Corner offsets in units of (dx, dy), counter-clockwise.
_HALF = np.array([(0.5, 0.5), (-0.5, 0.5), (-0.5, -0.5), (0.5, -0.5)])


def box_table(boxes: np.ndarray) -> np.ndarray:
    """float64 [M, 12] rows (x, y, area, bounding radius, 4 CCW corners as x0 y0 .. x3 y3)
    from boxes float32 [M, 7] (x, y, z, dx, dy, dz, heading), LiDAR frame, metres / radians."""
    bev = np.asarray(boxes, np.float64).reshape(-1, 7)
    x, y, dx, dy, heading = bev[:, 0], bev[:, 1], bev[:, 3], bev[:, 4], bev[:, 6]
    c, s = np.cos(heading), np.sin(heading)
    px = _HALF[None, :, 0] * dx[:, None]
    py = _HALF[None, :, 1] * dy[:, None]
    table = np.empty((len(bev), TABLE_WIDTH), np.float64)
    table[:, X], table[:, Y] = x, y
    table[:, AREA] = dx * dy
    table[:, RADIUS] = 0.5 * np.hypot(dx, dy)
    table[:, CORNERS::2] = x[:, None] + px * c[:, None] - py * s[:, None]
    table[:, CORNERS + 1::2] = y[:, None] + px * s[:, None] + py * c[:, None]
    return table


def may_overlap(table: np.ndarray, i: int, rest: np.ndarray) -> np.ndarray:
    """Mask over rows ``rest``: True unless the bounding circles are apart (then IoU is 0).
    The 1e-4 m margin makes sure no touching pair is skipped on rounding."""
    dist2 = (table[rest, X] - table[i, X]) ** 2 + (table[rest, Y] - table[i, Y]) ** 2
    reach = table[i, RADIUS] + table[rest, RADIUS] + 1e-4
    return dist2 <= reach * reach


def clip_polygon(polygon, ax: float, ay: float, bx: float, by: float):
    """The part of a convex polygon on the left of (inside) the directed edge a -> b."""
    ex, ey = bx - ax, by - ay
    result = []
    count = len(polygon)
    for k in range(count):
        px, py = polygon[k]
        qx, qy = polygon[(k + 1) % count]
        side_p = ex * (py - ay) - ey * (px - ax)
        side_q = ex * (qy - ay) - ey * (qx - ax)
        if side_p >= 0:
            result.append((px, py))
        if (side_p >= 0) != (side_q >= 0):
            t = side_p / (side_p - side_q)
            result.append((px + t * (qx - px), py + t * (qy - py)))
    return result


def polygon_area(polygon) -> float:
    """Shoelace area (>= 0 for counter-clockwise polygons); 0 for fewer than 3 vertices."""
    if len(polygon) < 3:
        return 0.0
    twice = 0.0
    count = len(polygon)
    for k in range(count):
        px, py = polygon[k]
        qx, qy = polygon[(k + 1) % count]
        twice = twice + (px * qy - qx * py)
    return 0.5 * twice


def iou_rows(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two ``box_table`` rows."""
    area_a, area_b = float(a[AREA]), float(b[AREA])
    if not (area_a > 0 and area_b > 0):
        return 0.0
    polygon = [(float(a[CORNERS + 2 * k]), float(a[CORNERS + 2 * k + 1])) for k in range(4)]
    clip = [(float(b[CORNERS + 2 * k]), float(b[CORNERS + 2 * k + 1])) for k in range(4)]
    for k in range(4):
        (ax, ay), (bx, by) = clip[k], clip[(k + 1) % 4]
        polygon = clip_polygon(polygon, ax, ay, bx, by)
    overlap = polygon_area(polygon)
    if overlap < 0.0:
        overlap = 0.0
    union = area_a + area_b - overlap
    return overlap / (union if union > EPS else EPS)


def rotated_bev_iou(box_a, box_b) -> float:
    """IoU of two boxes (x, y, z, dx, dy, dz, heading)."""
    table = box_table(np.stack([np.asarray(box_a), np.asarray(box_b)]))
    return iou_rows(table[0], table[1])
