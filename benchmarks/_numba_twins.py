"""numba twins of the project's native kernels (benchmark only; see vs_numba.py): the same
algorithm as each kernel module's, statement for statement where numba has the statement,
``@njit(nogil=True)`` without fastmath unless the kernel itself declares a flag or writes
explicit FMAs (then ``contract``, so numba may fuse what ours fuses). Static parameters are
arguments or module constants, as numba users write them. Where a kernel uses a vector
operation numba has no word for (a masked broadcast, a streaming store, a set-bit loop), the
twin writes the plain loop a numba user would."""

from __future__ import annotations

import math

import numba
import numpy as np

F = np.float32
jit = numba.njit(nogil=True, cache=True)
jit_contract = numba.njit(nogil=True, cache=True, fastmath={"contract"})


# ---- yolo ---------------------------------------------------------------------------------

@jit
def yolo_scan(levels, best, cand, threshold):
    count = offset = 0
    for logits in levels:  # [nc, hw] each
        nc, hw = logits.shape
        for p in range(hw):
            best[offset + p] = logits[0, p]
        for c in range(1, nc):
            for p in range(hw):
                best[offset + p] = max(best[offset + p], logits[c, p])
        for p in range(hw):
            cand[count] = offset + p
            count += best[offset + p] > threshold
        offset += hw
    return count


@jit
def _side(box, p, side):
    e = box[side * 16:(side + 1) * 16, p]
    top = e[0]
    for k in range(1, 16):
        top = max(top, e[k])
    total = expect = F(0.0)
    for k in range(16):
        v = F(math.exp(e[k] - top))
        total += v
        expect += v * F(k)
    return expect / total


@jit
def yolo_decode(box_levels, cls_levels, widths, strides, cand, n, conf, boxes, scores, classes):
    kept = 0
    for k in range(n):
        offset = level = 0
        for j in range(len(widths)):
            if cand[k] >= offset:
                level = j
                p = cand[k] - offset
            offset += cls_levels[j].shape[1]
        logits, box = cls_levels[level], box_levels[level]
        width, stride = widths[level], F(strides[level])
        best, top = 0, logits[0, p]
        for c in range(1, logits.shape[0]):
            if logits[c, p] > top:
                best, top = c, logits[c, p]
        score = F(1.0) / (F(1.0) + F(math.exp(-top)))
        if score > conf:
            ax, ay = F(p % width) + F(0.5), F(p // width) + F(0.5)
            x1, y1 = ax - _side(box, p, 0), ay - _side(box, p, 1)
            x2, y2 = ax + _side(box, p, 2), ay + _side(box, p, 3)
            cx, cy = (x1 + x2) / F(2.0) * stride, (y1 + y2) / F(2.0) * stride
            half_w, half_h = (x2 - x1) * stride / F(2.0), (y2 - y1) * stride / F(2.0)
            boxes[kept, 0], boxes[kept, 1] = cx - half_w, cy - half_h
            boxes[kept, 2], boxes[kept, 3] = cx + half_w, cy + half_h
            scores[kept], classes[kept] = score, F(best)
            kept += 1
    return kept


@jit
def yolo_nms(boxes, classes, n, class_offset, iou, max_det, work, suppressed, keep):
    for i in range(n):
        for c in range(4):
            work[c, i] = boxes[i, c] + classes[i] * class_offset
        work[4, i] = (work[2, i] - work[0, i]) * (work[3, i] - work[1, i])
        suppressed[i] = 0
    kept = 0
    for i in range(n):
        if kept < max_det and suppressed[i] == 0:
            keep[kept] = i
            kept += 1
            x1, y1, x2, y2, area = work[0, i], work[1, i], work[2, i], work[3, i], work[4, i]
            for j in range(i + 1, n):
                w = max(F(0.0), min(x2, work[2, j]) - max(x1, work[0, j]))
                h = max(F(0.0), min(y2, work[3, j]) - max(y1, work[1, j]))
                inter = w * h
                overlap = inter / ((area + work[4, j]) - inter)
                suppressed[j] = suppressed[j] | (np.float64(overlap) > iou)
    return kept


# ---- pillars: decode, NMS -------------------------------------------------------------------

@jit
def _best_class(cls, a):
    best, label = cls[a, 0], 0
    for k in range(1, cls.shape[1]):
        if cls[a, k] > best:
            best, label = cls[a, k], k
    return best, label


@jit
def pillars_decode(cls, box, dirs, table, boxes, scores, labels, anchor, counts, flags,
                   threshold, dir_offset, gate):
    written = passed = 0
    anchors, block, pi = cls.shape[0], flags.shape[0], F(math.pi)
    for start in range(0, anchors, block):
        stop = min(start + block, anchors)
        for a in range(start, stop):
            flags[a - start] = _best_class(cls, a)[0] >= gate
        for a in range(start, stop):
            if flags[a - start]:
                best, label = _best_class(cls, a)
                score = F(1.0) / (F(1.0) + F(math.exp(-best)))
                if score >= threshold:
                    passed += 1
                    if written < boxes.shape[0]:
                        diagonal = math.sqrt(table[a, 3] * table[a, 3] + table[a, 4] * table[a, 4])
                        for j in range(2):
                            boxes[written, j] = box[a, j] * diagonal + table[a, j]
                        boxes[written, 2] = box[a, 2] * table[a, 5] + table[a, 2]
                        for j in range(3, 6):
                            boxes[written, j] = F(math.exp(box[a, j])) * table[a, j]
                        shifted = box[a, 6] + table[a, 6] - dir_offset
                        limited = shifted - F(math.floor(shifted / pi)) * pi
                        boxes[written, 6] = limited + dir_offset + \
                            (pi if dirs[a, 1] > dirs[a, 0] else F(0.0))
                        scores[written], labels[written], anchor[written] = score, label, a
                        written += 1
    counts[0], counts[1] = written, passed - written


@jit
def _clip(sx, sy, dx, dy, count, xs, ys, k):
    ax, ay, bx, by = xs[k], ys[k], xs[(k + 1) % 4], ys[(k + 1) % 4]
    ex, ey = bx - ax, by - ay
    out = 0
    for k in range(count):
        nxt = 0 if k + 1 == count else k + 1
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


@jit
def _iou(table, i, j, xa, ya, xb, yb):
    area_a, area_b = table[i, 2], table[j, 2]
    if not (area_a > 0.0 and area_b > 0.0):
        return 0.0
    for k in range(4):
        xa[k], ya[k] = table[i, 4 + 2 * k], table[i, 5 + 2 * k]
    xs, ys = table[j, 4::2], table[j, 5::2]
    count = 4
    for k in range(2):
        count = _clip(xa, ya, xb, yb, count, xs, ys, 2 * k)
        count = _clip(xb, yb, xa, ya, count, xs, ys, 2 * k + 1)
    twice = 0.0
    for k in range(count):
        nxt = 0 if k + 1 == count else k + 1
        twice += xa[k] * ya[nxt] - xa[nxt] * ya[k]
    overlap = max(0.0 if count < 3 else 0.5 * twice, 0.0)
    return overlap / max(1e-8, area_a + area_b - overlap)


@jit
def pillars_nms(boxes, cosines, sines, m, keep, suppressed, table, extents, near, verts,
                threshold):
    half_x, half_y = (0.5, -0.5, -0.5, 0.5), (0.5, 0.5, -0.5, -0.5)
    for j in range(m):
        x, y = np.float64(boxes[j, 0]), np.float64(boxes[j, 1])
        dx, dy = np.float64(boxes[j, 3]), np.float64(boxes[j, 4])
        c, s = cosines[j], sines[j]
        table[j, 0], table[j, 1], table[j, 2] = x, y, dx * dy
        table[j, 3] = 0.5 * math.sqrt(dx * dx + dy * dy)
        for k in range(4):
            px, py = half_x[k] * dx, half_y[k] * dy
            table[j, 4 + 2 * k] = x + px * c - py * s
            table[j, 5 + 2 * k] = y + px * s + py * c
        xs, ys = table[j, 4::2], table[j, 5::2]
        extents[0, j], extents[1, j] = min(min(xs[0], xs[1]), min(xs[2], xs[3])), \
            max(max(xs[0], xs[1]), max(xs[2], xs[3]))
        extents[2, j], extents[3, j] = min(min(ys[0], ys[1]), min(ys[2], ys[3])), \
            max(max(ys[0], ys[1]), max(ys[2], ys[3]))
        suppressed[j] = 0
    xa, ya, xb, yb = verts[0], verts[1], verts[2], verts[3]
    kept = 0
    for i in range(m):
        if suppressed[i] == 0:
            keep[kept] = i
            kept += 1
            if kept >= keep.shape[0]:
                return kept
            lo_x, hi_x = extents[0, i] - 1e-4, extents[1, i] + 1e-4
            lo_y, hi_y = extents[2, i] - 1e-4, extents[3, i] + 1e-4
            for j in range(i + 1, m):
                near[j] = (extents[0, j] <= hi_x) & (extents[1, j] >= lo_x) & \
                    (extents[2, j] <= hi_y) & (extents[3, j] >= lo_y) & (suppressed[j] == 0)
            for j in range(i + 1, m):
                if near[j] != 0 and _iou(table, i, j, xa, ya, xb, yb) > threshold:
                    suppressed[j] = 1
    return kept
