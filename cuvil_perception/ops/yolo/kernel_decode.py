"""Native kernel ``yolo.decode``: best class, sigmoid score, DFL and dist2bbox for candidates.

``i64 f(ptr box_table, ptr cls_table, ptr cand, i64 n, f32 conf, ptr boxes, ptr scores,
ptr classes)``

- ``box_table`` / ``cls_table``: uint64 [L], the addresses of each level's raw box logits float32
  [4*16, h, w] (channel = side*16 + bin, sides l, t, r, b) and class logits float32 [nc, h, w].
- ``cand``: int64 [n] anchor indices (ascending, from ``yolo.scan``).
- out, for the m anchors whose score passes: ``boxes`` float32 [m, 4] (x1, y1, x2, y2) in
  letterboxed-input pixels, ``scores`` float32 [m], ``classes`` float32 [m]; returns m.

Per anchor: the best class is the first maximal logit; score = sigmoid(logit) (``kmath.sigmoid``,
the polynomial exp) and the anchor is kept when score > conf (float32, strict, as ultralytics
compares). DFL per side: softmax over the 16 bins with max subtraction, then the sum and the
expectation sum(bin * p) are strict left-to-right sums, then expectation / sum.
Box arithmetic follows the exported graph then ``xywh2xyxy`` operation by operation
(a - lt, a + rb, centre = (x1y1 + x2y2) / 2, wh = x2y2 - x1y1, times stride, centre -/+ wh / 2) so
it rounds like the reference. Fast-math: none (the polynomial exp uses ``contract`` internally).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, f32, i64, inline, kernel, kmath, simd, u64, unroll, view

REG_MAX = 16


@inline
def side_distance(box, p, side):
    """The DFL expectation of one side (l, t, r, b) of anchor ``p``, in grid cells: the
    softmax of its REG_MAX logits times 0 .. REG_MAX - 1."""
    e = box[side * REG_MAX:(side + 1) * REG_MAX, p]
    e = kmath.exp(e - simd.reduce_max(e))
    total = expect = f32(0.0)
    for k in unroll(REG_MAX):  # strict left-to-right sums
        total += e[k]
        expect += e[k] * k
    return expect / total


@kernel(name="yolo.decode")
def decode(box_table: Buf[u64], cls_table: Buf[u64], cand: Buf[i64, "n"], n: i64, conf: f32,
           boxes: Buf[f32, None, 4], scores: Buf[f32], classes: Buf[f32], *, grids: tuple,
           strides: tuple, nc: int) -> i64:
    kept = 0
    for k in range(n):
        offset = 0
        for level, (h, w) in enumerate(grids):  # levels are contiguous anchor ranges
            if cand[k] >= offset:  # (always true at level 0)
                p, width, hw, stride = cand[k] - offset, w, h * w, f32(strides[level])
                box_at, cls_at = box_table[level], cls_table[level]
            offset += h * w
        logits = view(cls_at, f32, nc, hw)
        best, top = 0, logits[0, p]
        for c in range(1, nc):  # strict: ties keep the lower class
            if logits[c, p] > top:
                best, top = c, logits[c, p]
        score = kmath.sigmoid(top)
        if score > conf:
            box = view(box_at, f32, 4 * REG_MAX, hw)
            ax, ay = f32(p % width) + 0.5, f32(p // width) + 0.5
            x1, y1 = ax - side_distance(box, p, 0), ay - side_distance(box, p, 1)
            x2, y2 = ax + side_distance(box, p, 2), ay + side_distance(box, p, 3)
            cx, cy = (x1 + x2) / 2.0 * stride, (y1 + y2) / 2.0 * stride
            half_w, half_h = (x2 - x1) * stride / 2.0, (y2 - y1) * stride / 2.0
            boxes[kept, :] = (cx - half_w, cy - half_h, cx + half_w, cy + half_h)
            scores[kept] = score
            classes[kept] = f32(best)
            kept += 1
    return kept


def decode_spec(grids, strides, nc: int) -> KernelSpec:
    """The ``yolo.decode`` kernel for these level grids, strides (pixels) and class count."""
    return decode.spec(grids=[list(map(int, g)) for g in grids],
                       strides=[float(s) for s in strides], nc=int(nc))
