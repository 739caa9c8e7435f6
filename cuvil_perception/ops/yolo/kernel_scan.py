"""Native kernel ``yolo.scan``: which anchors can pass the confidence threshold.

``i64 f(ptr cls_table, ptr best, ptr cand, f32 threshold)``

- ``cls_table``: uint64 [L], the address of each level's class logits, float32 [nc, h_l, w_l]
  (C-contiguous, batch dimension dropped).
- ``best``: float32 [A] scratch: the maximum class logit of every anchor (levels concatenated,
  anchors row-major within a level, as ultralytics orders them).
- ``cand``: int64 [A] out: indices of the anchors whose maximum logit is > ``threshold``, ascending.
- returns how many were written.

Since sigmoid is monotonic, ``threshold`` is ``logit(conf)`` (the caller lowers it by a safety
margin; the exact ``sigmoid(logit) > conf`` test happens in ``yolo.decode``). The class-major layout
makes the max a stream over ``nc`` rows of ``h*w`` floats, which the loop vectoriser widens;
compaction is branch-free (always store, advance by the comparison bit). No fast-math flags:
``max`` is exact.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, f32, i64, kernel, u64, view


@kernel(name="yolo.scan")
def scan(cls_table: Buf[u64], best: Buf[f32], cand: Buf[i64], threshold: f32, *, sizes: tuple,
         nc: int) -> i64:
    count = offset = 0
    for level, hw in enumerate(sizes):  # hw: the level's anchor count, h * w
        logits = view(cls_table[level], f32, nc, hw)
        for p in range(hw):
            best[offset + p] = logits[0, p]
        for c in range(1, nc):
            for p in range(hw):
                best[offset + p] = max(best[offset + p], logits[c, p])
        for p in range(hw):  # branch-free compaction
            cand[count] = offset + p
            count += best[offset + p] > threshold
        offset += hw
    return count


def scan_spec(grids, nc: int) -> KernelSpec:
    """The ``yolo.scan`` kernel for these level grids ((h, w) per level) and class count."""
    return scan.spec(sizes=[int(h) * int(w) for h, w in grids], nc=int(nc))
