"""Native kernel ``yolo.nms``: greedy NMS with torchvision's CPU semantics, class offsets included.

``i64 f(ptr boxes, ptr classes, i64 n, f32 class_offset, f64 iou, i64 max_det, ptr work,
ptr suppressed, ptr keep)``

- ``boxes``: float32 [n, 4] (x1, y1, x2, y2), already sorted by descending score (stable).
- ``classes``: float32 [n]; each box is shifted by ``classes[i] * class_offset`` (ultralytics'
  ``max_wh`` = 7680, or 0 when agnostic) before IoU, in float32 exactly as ultralytics adds it.
- ``work``: float32 [5, n] scratch (shifted x1, y1, x2, y2 and areas, structure of arrays);
  ``suppressed``: uint8 [n] scratch.
- ``keep``: int64 [max_det] out: positions (into the sorted input) of the kept boxes, in order.
- returns how many were kept (<= max_det).

IoU = inter / ((area_i + area_j) - inter) in float32, w and h clamped at 0; a box is suppressed when
IoU > ``iou`` compared in double (torchvision's kernel takes ``double iou_threshold``). Stopping
after ``max_det`` kept boxes is the same as torchvision then ``[:max_det]``. The inner loop is
branch-free (``suppressed[j] |= iou > thr``) so it vectorises; no fast-math flags.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, f32, f64, i64, kernel, u8


@kernel(name="yolo.nms")
def nms(boxes: Buf[f32, "n", 4], classes: Buf[f32, "n"], n: i64, class_offset: f32, iou: f64,
        max_det: i64, work: Buf[f32, 5, "n"], suppressed: Buf[u8, "n"],
        keep: Buf[i64, "max_det"]) -> i64:
    for i in range(n):  # shifted boxes and areas, structure of arrays
        work[0:4, i] = boxes[i, :] + classes[i] * class_offset
        work[4, i] = (work[2, i] - work[0, i]) * (work[3, i] - work[1, i])
        suppressed[i] = 0
    kept = 0
    for i in range(n):
        if kept < max_det and suppressed[i] == 0:
            keep[kept] = i
            kept += 1
            x1, y1, x2, y2, area = work[:, i]
            for j in range(i + 1, n):
                w = max(0.0, min(x2, work[2, j]) - max(x1, work[0, j]))
                h = max(0.0, min(y2, work[3, j]) - max(y1, work[1, j]))
                inter = w * h
                overlap = inter / ((area + work[4, j]) - inter)
                suppressed[j] = suppressed[j] | (f64(overlap) > iou)
    return kept


def nms_spec() -> KernelSpec:
    """The ``yolo.nms`` kernel (shape-independent)."""
    return nms.spec()
