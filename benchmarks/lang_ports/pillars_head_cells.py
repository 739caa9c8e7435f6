"""Kernel-language port of ``cuvil_perception/ops/pillars/kernel_head_cells.py`` (same signature
and semantics, bitwise equal) that the package does NOT use yet: ~1.2x slower, see that
docstring. Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from cuvil_perception.compile import KernelSpec
from cuvil_perception.compile.lang import (Buf, f32, i32, i64, kernel, kmath, local, select, u64,
                                           unroll, view)
from cuvil_perception.ops.pillars.config import HeadConfig, logit_gate
from cuvil_perception.ops.pillars.signatures import head_cells_args

LANES = 16


def padded(width: int) -> int:
    """J rounded up to whole 16-lane vectors (the weight / bias row length)."""
    return -(-width // LANES) * LANES


@kernel(name="pillars.head_cells")  # not switched: see the package kernel's docstring
def head_cells(cls: Buf[f32, "cells", "groups"], feats: Buf[u64],
               weights: Buf[f32, None, "width"], bias: Buf[f32, "width"],
               box: Buf[f32, "cells", "jb"], dirs: Buf[f32, "cells", "jd"],
               found: Buf[i32, "cells"], *, cells: int,
               groups: int, parts: tuple, jb: int, jd: int, gate: float, width: int) -> i64:
    acc = local(f32, width)
    n = 0
    for c in range(cells):
        best = cls[c, 0]
        for g in unroll(groups - 1):
            best = select(cls[c, g + 1] > best, cls[c, g + 1], best)
        if best >= gate:
            found[n] = c
            n += 1
            for j in unroll(width):
                acc[j] = bias[j]
            first = 0
            for k, count in enumerate(parts):  # F[:, c], part by part, channels in order
                feat = view(feats[k], f32, count, cells)
                for ci in range(count):
                    value = feat[ci, c]
                    for j in unroll(width):
                        acc[j] = kmath.fma(value, weights[first + ci, j], acc[j])
                first += count
            for j in unroll(jb):
                box[c, j] = acc[j]
            for j in unroll(jd):
                dirs[c, j] = acc[jb + j]
    return n


def head_cells_spec(map_size: tuple, head: HeadConfig, parts: tuple) -> KernelSpec:
    """The candidate-cell heads kernel for one head map (H, W) and feature parts (C_1, ..)."""
    per_cell = head.anchors_per_cell
    jb, jd = per_cell * 7, per_cell * 2
    return head_cells.spec(cells=map_size[0] * map_size[1], groups=per_cell * head.num_classes,
                           parts=[int(c) for c in parts], jb=jb, jd=jd,
                           gate=logit_gate(head.score_threshold), width=padded(jb + jd),
                           arg_docs=head_cells_args())
