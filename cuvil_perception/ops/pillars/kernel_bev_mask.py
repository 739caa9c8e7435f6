"""Change marks of a Concat in the BEV network: a cell of the concatenated map differs from the
empty frame's when a cell of one of its parts does (bit 0 of the parts' masks, see
kernel_bev_conv).

Signature::

    void bev_mask_union(ptr first u8[cells], ptr second u8[cells], ptr out u8[cells])

out[c] = (first[c] | second[c]) & 1; ``out`` may be ``first`` (a Concat of more parts folds
them in one by one), hence ``noalias=False``.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, kernel, u8


@kernel(name="pillars.bev_mask_union", noalias=False)
def bev_mask_union(first: Buf[u8, "cells"], second: Buf[u8, "cells"], out: Buf[u8, "cells"], *,
                   cells: int):
    for c in range(cells):
        out[c] = (first[c] | second[c]) & 1


def bev_mask_union_spec(cells: int) -> KernelSpec:
    return bev_mask_union.spec(cells=cells)
