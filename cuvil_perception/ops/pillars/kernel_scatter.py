"""Native PillarScatter into a persistent [C, ny, nx] map that clears only last frame's cells.

The pipeline uses kernel_scatter_lines (whole-line, streaming stores: ~2-3x faster) when the grid
allows whole lines; ``"merged"`` is the fallback for the other grids, and the other cell-granular
orders stay as the benchmark's baseline. ``mark_and_sort`` is shared with kernel_scatter_lines.

The signature, with units and roles, is the kernel's annotations. State between calls: ``bev``
holds the previous frame's map, ``prev_cells[:prev_count]`` its cells; ``bitmap`` is all-zero on
entry and exit (u64 words, annotated i64: a u64 loads as i64 anyway, and so the bit operations
read the same uncompiled; its marker's ``dtype="u64"`` keeps them u64 for a C caller);
``cell_pillar``, ``cells`` and ``pids`` are scratch. Result: ``bev``
equals ``reference.scatter`` bitwise (every cell not written this frame is +0.0).

Write order (static ``order``), measured in benchmarks/pillars.py:

- ``"channel"``: pillars sorted by cell (a bitmap of the touched cells, scanned word by word),
  then for each channel plane: clear last frame's cells, write this frame's - each plane is
  visited once, in increasing address order.
- ``"pillar"``: same sorted order, but each pillar writes its C channels (C scattered lines).
- ``"merged"``: walk last frame's and this frame's sorted cell lists together; each cell
  of the union is visited once and gets either its C new values or C zeros, pillar-outer. A cell
  used in both frames is written once, not cleared then written.

Measured (benchmarks/pillars.py, KITTI frames): a frame costs about the DRAM traffic of the map
lines it touches (this frame's and last frame's cells x C planes x 64 B, read for ownership and
written back); "merged" and "pillar" are close, "channel" is slower (it gathers feature columns).
Software prefetching of the cell 2-16 places ahead gave no gain beyond the noise.

No floating-point arithmetic: values are copied, so bitwise equality holds.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Scratch, State, bits, f32, i32, i64, inline, kernel,
                             select)
from .config import PillarConfig

ORDERS = ("merged", "channel", "pillar")
MERGED, CHANNEL, PILLAR = range(3)  # the static ``order`` a kernel gets: an index into ORDERS
PAST = 1 << 40  # a cell index past every grid: what an exhausted sorted list reads as


@inline
def mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx, ny):
    """Fill ``cells[:count]`` with this frame's cells in increasing order and ``pids[:count]``
    with their pillars: mark each cell in ``bitmap`` (and its pillar in ``cell_pillar``), then
    scan the bitmap in address order (left all-zero again)."""
    for p in range(count):
        cell = i64(coords[p, 1]) * nx + coords[p, 2]
        cell_pillar[cell] = p
        bitmap[cell >> 6] = bitmap[cell >> 6] | (1 << (cell & 63))
    written = 0
    for w in range((nx * ny + 63) // 64):
        if bitmap[w] != 0:  # only then store: the scan stays read-only over empty regions
            for bit in bits(bitmap[w]):
                cell = (w << 6) + bit
                cells[written], pids[written] = cell, cell_pillar[cell]
                written += 1
            bitmap[w] = 0


@inline
def item_or_past(items, k, size):
    """``items[k]`` as i64, or PAST when ``k >= size`` (the load stays inside the buffer)."""
    return select(k < size, i64(items[select(k < size, k, 0)]), PAST)


@inline
def merged(features, bev, prev_cells, previous, cells, pids, count, channels, plane):
    """One sorted walk of last frame's and this frame's cells (see ``"merged"``)."""
    i, j = 0, 0
    while (i < previous) | (j < count):
        old, new = item_or_past(prev_cells, i, previous), item_or_past(cells, j, count)
        if new <= old:
            pid = i64(pids[j])
            for c in range(channels):
                bev[c * plane + new] = features[pid, c]
        else:
            for c in range(channels):
                bev[c * plane + old] = 0.0
        j += new <= old
        i += old <= new


@kernel(name="pillars.scatter", noalias=False)  # noalias lets LLVM turn the
# strided plane stores of "pillar" into masked scatters, slower than scalar stores (Zen 4)
def scatter(features: Buf[f32, None, "channels", In(doc="PFN output", rows="count")],
            coords: Buf[i32, None, 3, In("cells (z, y, x)", rows="count")],
            count: i64[In("pillars")],
            bev: Buf[f32, State(doc="the BEV map; holds the previous frame on entry "
                                "(zero-initialise once, 64-byte aligned)",
                                shape=("channels", "ny", "nx"))],
            prev_cells: Buf[i32, State("cells", "the previous frame's sorted cells "
                                       "(zero-initialise)", rows="max_pillars + 1")],
            prev_count: Buf[i64, 1, State("cells", "zero-initialise")],
            bitmap: Buf[i64, State(doc="all zero on entry and exit (zero-initialise)",
                                   rows="(ny * nx + 63) / 64", dtype="u64")],
            cell_pillar: Buf[i32, Scratch("pillar id", rows="ny * nx")],
            cells: Buf[i32, Scratch("cells", rows="max_pillars")],
            pids: Buf[i32, Scratch("pillar id", rows="max_pillars")], *, channels: int, nx: int,
            ny: int, order: int):
    mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx, ny)
    previous, plane = prev_count[0], nx * ny
    if order == MERGED:
        merged(features, bev, prev_cells, previous, cells, pids, count, channels, plane)
    else:
        for c in range(channels):  # clear plane by plane ("channel": and write the plane)
            for k in range(previous):
                bev[c * plane + prev_cells[k]] = 0.0
            if order == CHANNEL:
                for k in range(count):
                    bev[c * plane + cells[k]] = features[pids[k], c]
        if order == PILLAR:
            for k in range(count):
                for c in range(channels):
                    bev[c * plane + cells[k]] = features[pids[k], c]
    for k in range(count):
        prev_cells[k] = cells[k]
    prev_count[0] = count


def scatter_spec(config: PillarConfig, order: str = "merged") -> KernelSpec:
    """The scatter kernel for one grid; ``order`` as in the module docstring."""
    if order not in ORDERS:
        raise ValueError(f"scatter: order must be one of {ORDERS}, got {order!r}")
    return scatter.spec(channels=config.num_features, nx=config.nx, ny=config.ny,
                        order=ORDERS.index(order))
