"""Change marks of the native network's input map (see kernel_bev_conv): bit 0 set at the cells
the fused first layer's pillars reached this frame (its ``touched`` list), clear elsewhere.

Signature::

    void bev_marks(ptr reached i32[count], i64 count, ptr mask u8[cells])

Every byte of ``mask`` is written (the whole map is cleared first: 54 KB on the demo grid, one
vectorised pass, cheaper than keeping last frame's list).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, i32, i64, kernel, u8


@kernel(name="pillars.bev_marks")
def bev_marks(reached: Buf[i32], count: i64, mask: Buf[u8, "cells"], *, cells: int):
    for c in range(cells):
        mask[c] = 0
    for k in range(count):
        mask[i64(reached[k])] = 1


def bev_marks_spec(cells: int) -> KernelSpec:
    return bev_marks.spec(cells=cells)
