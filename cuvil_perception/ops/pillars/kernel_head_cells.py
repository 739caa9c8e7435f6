"""Native box and direction heads at candidate cells only (1x1 convs evaluated where decode looks).

Signature::

    i64 head_cells(ptr cls f32[HW, G], ptr feats ptr[N], ptr weights f32[C_f, J],
                   ptr bias f32[J], ptr box f32[HW, JB], ptr dir f32[HW, JD], ptr cells i32[HW])

G = A*K class logits per cell (the NHWC class map); F the map the heads read, given as N
channel parts (``feats[k]``: f32[C_k, HW], NCHW as the runtime returns them; static ``parts`` =
(C_1, .., C_N), C_f their sum: the parts of a Concat the network no longer builds, see
onnx_rewrite.split_concat); JB = A*7 box and JD = A*2 direction values per cell, J = JB + JD
rounded up to 16 (``weights[:, j]`` = the j-th head row, zero-padded). Semantics
(``reference.head_cells``): a cell is a candidate when one of its anchors' best class logit
(taken as decode takes it) reaches ``gate`` (decode's own logit gate, ``config.logit_gate``:
every anchor decode decodes lies in a candidate cell); for candidates, box[c] | dir[c] =
weights.T @ F[:, c] + bias, summed over channels in order; their indices go to ``cells``
ascending; returns how many. Rows of other cells are left as they were (decode never reads
them). ``cells`` has a row per cell: no overflow.

Cost: the gate reads the class map (HW x G floats) once; a candidate costs C_f strided loads
(the gather of F[:, c]) and C_f x J FMAs. The J outputs of a cell are one vector value of J
lanes (``Vec[f32, J]``: four zmm registers for J = 64), updated by one vector FMA per channel
(``span`` lanes at a time when J is wider than `SPAN`, the gather repeated per span). Left to
the SLP vectoriser, 54 unrolled scalar accumulators were packed 16+16+8+8+4+2 (1.15x slower).
On the demo model: ~250 candidate cells of 53568 - the dense convs did 54 x 128 MACs at every
cell. fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, f32, i32, i64, inline, kernel, kmath, select, simd, u64, unroll,
                             view)
from .config import HeadConfig, logit_gate
from .signatures import head_cells_args

LANES = 16
SPAN = 128  # the most output lanes accumulated at once (8 zmm registers)


def padded(width: int) -> int:
    """J rounded up to whole 16-lane vectors (the weight / bias row length)."""
    return -(-width // LANES) * LANES


@inline
def passes(cls, c, groups, classes, gate):
    """Whether some anchor of cell ``c`` has its best class logit >= gate, the best taken the
    way the decode kernel takes it (first logit, replaced only by a strictly greater one), so
    every anchor decode looks at - NaN logits included - lies in a candidate cell."""
    hit = False
    for a in unroll(groups // classes):
        best = cls[c, a * classes]
        for k in unroll(classes - 1):
            value = cls[c, a * classes + k + 1]
            best = select(value > best, value, best)
        hit = hit | (best >= gate)
    return hit


@kernel(name="pillars.head_cells", fastmath=("contract",), version=4)
def head_cells(cls: Buf[f32, "cells", "groups"], feats: Buf[u64],
               weights: Buf[f32, None, "width"], bias: Buf[f32, "width"],
               box: Buf[f32, "cells", "jb"], dirs: Buf[f32, "cells", "jd"],
               found: Buf[i32, "cells"], *, cells: int, groups: int, classes: int,
               parts: tuple, jb: int, jd: int, gate: float, width: int) -> i64:
    n = 0
    for c in range(cells):
        if passes(cls, c, groups, classes, gate):
            found[n] = c
            n += 1
            for part in unroll(-(-width // SPAN)):  # `lo` and `span` are constants
                lo = part * SPAN
                span = min(SPAN, width - lo)
                acc = simd.load(bias, lo, span)
                row = 0
                for k, count in enumerate(parts):  # F[:, c], part by part, channels in order
                    feat = view(feats[k], f32, count, cells)
                    for ci in range(count):
                        w = simd.load(weights, (row + ci) * width + lo, span)
                        acc = kmath.fma(simd.splat(feat[ci, c], span), w, acc)
                    row += count
                for j in unroll(min(span, jb + jd - lo)):
                    if lo + j < jb:
                        box[c, lo + j] = acc[j]
                    else:
                        dirs[c, lo + j - jb] = acc[j]
    return n


def head_cells_spec(map_size: tuple, head: HeadConfig, parts: tuple) -> KernelSpec:
    """The candidate-cell heads kernel for one head map (H, W) and feature parts (C_1, ..)."""
    per_cell = head.anchors_per_cell
    jb, jd = per_cell * 7, per_cell * 2
    return head_cells.spec(cells=map_size[0] * map_size[1], groups=per_cell * head.num_classes,
                           classes=head.num_classes, parts=[int(c) for c in parts], jb=jb,
                           jd=jd, gate=logit_gate(head.score_threshold), width=padded(jb + jd),
                           arg_docs=head_cells_args())
