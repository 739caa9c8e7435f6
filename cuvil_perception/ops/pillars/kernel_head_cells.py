"""Native box and direction heads at candidate cells only (1x1 convs evaluated where decode looks).

The signature, with units and roles, is the kernel's annotations (HW = ``cells``, G =
``groups``, J = ``width``, JB = ``jb``, JD = ``jd``). G = A*K class logits per cell (the NHWC
class map); F the map the heads read, given as N channel parts (``feats[k]``: f32[C_k, HW], NCHW
as the runtime returns them, or with static ``nhwc`` f32[HW, C_k] as the native network
(native_net) keeps its maps; static ``parts`` = (C_1, .., C_N), C_f their sum: the parts of a
Concat the network no longer builds, see onnx_rewrite.split_concat); JB = A*7 box and JD = A*2
direction values per cell, J = JB + JD rounded up to 16 (``weights[:, j]`` = the j-th head row,
zero-padded). J and G are at most a vector's 256 lanes: a model with more than 28 anchors per
cell keeps its dense heads (onnx_sparse), one with more than 256 class logits per cell is a
ConfigError (native_sparse). Semantics (``reference.head_cells``): a cell is a candidate when
one of its anchors' best class logit (taken as decode takes it) reaches ``gate`` (decode's own
logit gate, ``config.logit_gate``: every anchor decode decodes lies in a candidate cell); for
candidates, box[c] | dir[c] = weights.T @ F[:, c] + bias, summed over channels in order; their
indices go to ``cells`` ascending in ``found``; returns how many. Rows of other cells are left
as they were (decode never reads them). ``found`` has a row per cell: no overflow.

Cost: the gate reads the class map (HW x G floats) once - a cell's G logits as one vector, the
best of each anchor taken across K shuffles of it (the A anchors side by side in one
register, where the IR's scalar chains were vectorised as 4 + 2 anchors); a candidate costs
C_f strided loads (the gather of F[:, c]) and C_f x J FMAs. The J outputs of a cell are one
vector value (``Vec[f32, J]``: four zmm registers for J = 64) updated by one vector FMA per
channel - the code of the hand-built IR this kernel replaced (bitwise equal; it lived in
benchmarks/ir_baseline/ until commit 96a65d84da4f). Left to the SLP vectoriser, 54 unrolled
scalar accumulators were packed 16+16+8+8+4+2 (1.15x slower). On the demo model: ~250 candidate cells of 53568 - the dense
convs did 54 x 128 MACs at every cell. fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Out, f32, i32, i64, inline, kernel, kmath, simd, u64,
                             unroll, view)
from .config import HeadConfig, logit_gate

ROW = "(jb + jd + 15) / 16 * 16"  # the header's spelling of ``width`` (a weight / bias row)


@inline
def part_product(address, weights, acc, c, row, count, cells, nhwc):
    """acc + weights[row:row + count].T @ (the part's channels at cell c); the part f32
    [count, cells], or [cells, count] when ``nhwc`` (a helper: a view bound in an ``if`` of
    the unrolled part loop would be two buffers under one name)."""
    if nhwc:
        cell = view(address, f32, cells, count)
        for ci in range(count):
            acc = kmath.fma(cell[c, ci], weights[row + ci, :], acc)
    else:
        feat = view(address, f32, count, cells)
        for ci in range(count):
            acc = kmath.fma(feat[ci, c], weights[row + ci, :], acc)
    return acc


@kernel(name="pillars.head_cells", fastmath=("contract",), version=4)
def head_cells(
        cls: Buf[f32, "cells", "groups", In("logit", "class head (NHWC)")],
        feats: Buf[u64, In("address", "address of each channel part k of the heads' input map, "
                           "f32 [parts[k], cells] (static nhwc: f32 [cells, parts[k]], the native "
                           "network's map)", rows="len(parts)")],
        weights: Buf[f32, None, "width", In(
            doc="box rows then direction rows, transposed, zero-padded",
            shape=("sum(parts)", ROW))],
        bias: Buf[f32, "width", In(shape=(ROW,))],
        box: Buf[f32, "cells", "jb", Out("encoded residuals", "written at candidate cells only")],
        dir: Buf[f32, "cells", "jd", Out("logit", "written at candidate cells only")],
        found: Buf[i32, "cells", Out("cell index", "candidate cells, ascending; the return value "
                                                   "says how many")], *,
        cells: int, groups: int, picks: tuple, parts: tuple, jb: int, jd: int, gate: float,
        width: int, nhwc: bool = False) -> i64:
    n = 0
    start = bias[:]
    for c in range(cells):
        # a candidate: some anchor's best logit >= gate, the best taken as decode takes it (the
        # first logit, replaced only by a strictly greater one; a NaN first never passes).
        # picks[k]: the lanes of class k of every anchor
        logits = cls[c, :]
        best = simd.shuffle(logits, picks[0])
        for k in unroll(len(picks) - 1):
            value = simd.shuffle(logits, picks[k + 1])
            best = simd.select(value > best, value, best)
        if simd.any(best >= gate):
            found[n] = c
            n += 1
            acc = start
            row = 0
            for k, count in enumerate(parts):  # F[:, c], part by part, channels in order
                acc = part_product(feats[k], weights, acc, c, row, count, cells, nhwc)
                row += count
            box[c, :] = simd.slice(acc, 0, jb)
            dir[c, :] = simd.slice(acc, jb, jd)
    return n


def head_cells_spec(map_size: tuple, head: HeadConfig, parts: tuple,
                    nhwc: bool = False) -> KernelSpec:
    """The candidate-cell heads kernel for one head map (H, W) and feature parts (C_1, ..);
    ``width`` (J) is the weight / bias row length, 9 values per anchor rounded up to 16;
    ``nhwc``: the parts are f32[HW, C_k] (the native network's maps) instead of [C_k, HW]."""
    a, k = head.anchors_per_cell, head.num_classes
    picks = [[anchor * k + j for anchor in range(a)] for j in range(k)]
    return head_cells.spec(cells=map_size[0] * map_size[1], groups=a * k, picks=picks, jb=7 * a,
                           jd=2 * a, width=-(-9 * a // 16) * 16, parts=[int(c) for c in parts],
                           gate=logit_gate(head.score_threshold), nhwc=bool(nhwc))
