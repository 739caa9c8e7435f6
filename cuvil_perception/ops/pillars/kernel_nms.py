"""Native greedy rotated-BEV NMS over score-sorted boxes.

The signature, with units and roles, is the kernel's annotations. ``boxes`` are already sorted
by descending score (the caller sorts: a stable argsort, ties by lower anchor index);
``cosines`` / ``sines`` are numpy's cos / sin of their float64 headings. Returns how many
positions were written to ``keep`` (positions into the sorted rows).

The kernel first fills ``table`` with the rows of ``bev_iou.box_table`` (the same float64
operations in the same order: bitwise the same rows), and ``extents`` with each box's
axis-aligned extent (x_min, x_max, y_min, y_max of its corners; column-major, stride ``pre``).
Then, per kept box, a branch-free (vectorised) pass marks in ``near`` the live boxes whose
extents meet its own (1e-4 m margin), and only those go through the IoU, which is
``bev_iou.iou_rows`` step for step: Sutherland-Hodgman clipping of a's corners by b's 4 edges,
shoelace area, same float64 operations, no fast-math - so every IoU computed equals the
reference's. The reference prefilters with bounding circles instead; a pair either prefilter
drops has no overlap (IoU ~ 0, never > the threshold), so the decisions are the same.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Out, Scratch, f32, f64, i32, i64, inline, kernel, kmath,
                             local, select, simd, u8, unroll)
from ...geometry.bev_iou import AREA, CORNERS, EPS, RADIUS, TABLE_WIDTH, X, Y
from .config import HeadConfig

MAX_VERTS = 16  # a quad clipped by 4 half-planes has at most 8 vertices
HALF_X = simd.vector(f64, (0.5, -0.5, -0.5, 0.5))  # bev_iou._HALF[:, 0]
HALF_Y = simd.vector(f64, (0.5, 0.5, -0.5, -0.5))  # bev_iou._HALF[:, 1]
MARGIN = simd.vector(f64, (-1e-4, 1e-4, -1e-4, 1e-4))  # extents widened by 0.1 mm each way


@inline
def fill_row(boxes, cosines, sines, table, extents, j):
    """table[j] = bev_iou.box_table(boxes)[j] bit for bit; extents[:, j] = its corners' box."""
    x, y = f64(boxes[j, 0]), f64(boxes[j, 1])
    dx, dy = f64(boxes[j, 3]), f64(boxes[j, 4])
    c, s = cosines[j], sines[j]
    table[j, X], table[j, Y], table[j, AREA] = x, y, dx * dy
    table[j, RADIUS] = 0.5 * kmath.sqrt(dx * dx + dy * dy)
    px, py = HALF_X * dx, HALF_Y * dy  # the 4 corners at once, as box_table writes them
    xs, ys = x + px * c - py * s, y + px * s + py * c
    table[j, CORNERS::2], table[j, CORNERS + 1::2] = xs, ys
    extents[:, j] = (simd.reduce_min(xs), simd.reduce_max(xs), simd.reduce_min(ys),
                     simd.reduce_max(ys))


@inline
def clip(sx, sy, dx, dy, count, xs, ys, k):
    """bev_iou.clip_polygon: (sx, sy) (count vertices) clipped by the edge from corner k to
    corner k + 1 of a box (its corners the vectors ``xs``, ``ys``) into (dx, dy)."""
    ax, ay, bx, by = xs[k], ys[k], xs[(k + 1) % 4], ys[(k + 1) % 4]
    ex, ey = bx - ax, by - ay
    out = 0
    for k in range(count):
        nxt = select(k + 1 == count, 0, k + 1)  # (k + 1) % count without a division
        px, py, qx, qy = sx[k], sy[k], sx[nxt], sy[nxt]
        side_p = ex * (py - ay) - ey * (px - ax)
        side_q = ex * (qy - ay) - ey * (qx - ax)
        if side_p >= 0.0:
            dx[out], dy[out] = px, py
            out += 1
        if (side_p >= 0.0) != (side_q >= 0.0):
            t = side_p / (side_p - side_q)
            dx[out], dy[out] = px + t * (qx - px), py + t * (qy - py)
            out += 1
    return out


@inline
def polygon_area(xs, ys, count):
    """bev_iou.polygon_area: 0 below 3 vertices, else 0.5 * sequential shoelace sum."""
    twice = 0.0
    for k in range(count):
        nxt = select(k + 1 == count, 0, k + 1)
        twice += xs[k] * ys[nxt] - xs[nxt] * ys[k]
    return select(count < 3, 0.0, 0.5 * twice)


@inline
def iou(table, i, j, xa, ya, xb, yb):
    """bev_iou.iou_rows(table[i], table[j]) as float64."""
    area_a, area_b = table[i, AREA], table[j, AREA]
    if not (area_a > 0.0 and area_b > 0.0):  # (NaN areas too)
        return 0.0
    xa[0:4], ya[0:4] = table[i, CORNERS::2], table[i, CORNERS + 1::2]
    xs, ys = table[j, CORNERS::2], table[j, CORNERS + 1::2]
    count = 4
    for k in unroll(2):  # clip by b's 4 edges, ping-ponging between the two buffers
        count = clip(xa, ya, xb, yb, count, xs, ys, 2 * k)
        count = clip(xb, yb, xa, ya, count, xs, ys, 2 * k + 1)
    overlap = max(polygon_area(xa, ya, count), 0.0)  # (NaN stays NaN, as in bev_iou)
    return overlap / max(EPS, area_a + area_b - overlap)  # bev_iou: union if union > EPS else EPS


@kernel(name="pillars.nms")
def nms(boxes: Buf[f32, "m", 7, In("m, rad (x y z dx dy dz heading)",
                                    "sorted by descending score")],
        cosines: Buf[f64, "m", In(doc="cos of each heading")],
        sines: Buf[f64, "m", In(doc="sin of each heading")],
        m: i64[In("boxes", "rows of boxes", most="pre")],
        keep: Buf[i32, "post", Out("row index", "rows kept, by descending score; the return "
                                                "value says how many")],
        suppressed: Buf[u8, "pre", Scratch()], table: Buf[f64, "pre", TABLE_WIDTH, Scratch()],
        extents: Buf[f64, 4, "pre", Scratch("m")], near: Buf[u8, "pre", Scratch()], *,
        threshold: float, post: int, pre: int) -> i64:
    xa, ya = local(f64, MAX_VERTS), local(f64, MAX_VERTS)
    xb, yb = local(f64, MAX_VERTS), local(f64, MAX_VERTS)
    for j in range(m):
        fill_row(boxes, cosines, sines, table, extents, j)
        suppressed[j] = 0
    kept = 0
    for i in range(m):
        if suppressed[i] == 0:
            keep[kept] = i
            kept += 1
            if kept >= post:
                return kept
            lo_x, hi_x, lo_y, hi_y = extents[:, i] + MARGIN
            for j in range(i + 1, m):  # branch-free: the live boxes whose extents meet i's
                near[j] = (extents[0, j] <= hi_x) & (extents[1, j] >= lo_x) & \
                    (extents[2, j] <= hi_y) & (extents[3, j] >= lo_y) & (suppressed[j] == 0)
            for j in range(i + 1, m):
                if near[j] != 0 and iou(table, i, j, xa, ya, xb, yb) > threshold:
                    suppressed[j] = 1
    return kept


def nms_spec(head: HeadConfig) -> KernelSpec:
    """The NMS kernel for one head's threshold and keep cap."""
    return nms.spec(threshold=head.nms_threshold, post=head.nms_post, pre=head.nms_pre)
