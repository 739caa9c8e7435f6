"""Native PillarScatter that writes whole 64-byte lines of the map, never reading it.

The signature (the annotations) is kernel_scatter's, with last frame's *lines* as state and a
union scratch. ``bev`` must be 64-byte aligned and ``nx * ny`` a multiple of 16, so every run of
16 cells (a "line": ``cell >> 4``) is one cache line in every channel plane. State between
calls: ``bev`` holds the previous frame's map, ``prev_cells[:prev_count]`` the sorted lines it
wrote (the name is kernel_scatter's, which the C header and `native.ScatterKernel` keep);
``bitmap`` is all-zero on entry and exit; the other buffers are scratch. Result: ``bev``
equals ``reference.scatter`` bitwise.

Why whole lines: every cell not written this frame must be +0.0 and every other cell was
already zero, so the final content of a line touched last frame or this frame is known without
reading it: this frame's values in their lanes, zeros elsewhere. Steps:

1. sort this frame's cells through a bitmap (kernel_scatter.mark_and_sort);
2. merge them with last frame's sorted lines into the sorted union of lines, each with the
   range of this frame's sorted cells that fall in it (empty: a line to clear);
3. gather the features into sorted-cell order, chunk-major (``gathered[q, j]`` = channels
   16q..16q+15 of the j-th pillar by cell), so step 4 reads them sequentially, once per chunk
   (reading the [P, C] rows in cell order instead is a random access per pillar and chunk,
   measured 2x slower on the bigger frames). The features are read in pillar order and
   written to their rank (sequential reads from DRAM prefetch well, random ones do not);
4. per chunk of 16 channels, per union line: compose the 16 lines (one per channel plane) in
   16 registers - each pillar of the line loads its 16 features of the chunk as one vector and
   broadcasts each into its lane (a masked broadcast per channel) - and store them whole.

Measured on a Zen 4 (one thread; benchmarks/pillars.py and ad-hoc kernels):

- store order: a line to all 64 planes before the next line streams at ~30 GB/s, 16 planes at
  a time (chunk-outer, this kernel) or plane by plane at ~50-70 GB/s;
- with ``stream`` the stores are non-temporal: a full-line streaming store needs no read for
  ownership, so a frame moves (lines x C x 64 B) once instead of twice (without ``stream`` the
  same stores go through the cache: ~2x slower on unrelated frames). A seq_cst fence at the
  end orders them before the caller (or another thread) reads the map;
- the cost left is mostly compute (composing ~0.15 ms on the bigger KITTI frames) and reading
  the features (step 3, DRAM-bound when they are not cached);
- tried and slower: transposing the features channel-major and filling each line with one
  masked expand-load per channel (``vexpandps`` is slow on Zen 4: 1.6x the whole kernel).

No floating-point arithmetic: values are only moved (loads, lane selects, stores), so bitwise
equality holds, including -0.0 and NaN payloads of the features.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Scratch, State, f32, i32, i64, inline, kernel, simd,
                             unroll)
from .config import PillarConfig
from .kernel_scatter import item_or_past, mark_and_sort

LANES = 16  # floats per 64-byte cache line; also channels per chunk
SPREAD = tuple(c for c in range(LANES) for _ in range(LANES))  # channel c into all 16 lanes
TILE = tuple(lane for _ in range(LANES) for lane in range(LANES))  # a lane mask, 16 times


@inline
def union_of_lines(prev_lines, previous, cells, count, union_lines, union_ends):
    """Sorted union of last frame's lines and this frame's cells' lines; for union entry k,
    this frame's cells in it are ``cells[union_ends[k-1]:union_ends[k]]`` (0 for k = 0).
    Returns the number of entries."""
    i, j, n = 0, 0, 0
    while (i < previous) | (j < count):
        line = min(item_or_past(cells, j, count) >> 4, item_or_past(prev_lines, i, previous))
        i += item_or_past(prev_lines, i, previous) == line
        while (j < count) and (cells[j] >> 4 == line):  # at most 16 steps
            j += 1
        union_lines[n], union_ends[n] = line, j
        n += 1
    return n


@inline
def keep_lines(union_lines, union_ends, n_union, prev_lines, prev_count):
    """prev_lines = the union lines that hold a cell of this frame (next frame's clear list).
    Every entry is stored, the slot advancing only past kept ones (no branch; hence the one
    spare slot of ``prev_lines``)."""
    kept, start = 0, 0
    for k in range(n_union):
        prev_lines[kept] = union_lines[k]
        kept += union_ends[k] > start
        start = i64(union_ends[k])
    prev_count[0] = kept


@inline
def gather(features, pids, rank, count, gathered, channels):
    """gathered[q, j, :] = features[pids[j], 16q:16q+16] for j < count (64-byte moves), read
    in pillar order through ``rank`` (the inverse of ``pids``)."""
    for j in range(count):
        rank[pids[j]] = j
    for p in range(count):
        for q in unroll(channels // LANES):
            gathered[q, rank[p], :] = features[p, q * LANES:(q + 1) * LANES]


@inline
def compose(gathered, q, cells, start, end, lane):
    """The 16 lines of one chunk of channels for one line as one vector ([channel, lane]):
    zeros, with the features of the sorted pillars ``start..end`` in their cells' lanes. A
    pillar is one lane compare and 16 masked broadcasts (LLVM splits the 256 lanes in 16)."""
    line = simd.splat(f32(0.0), LANES * LANES)
    for t in range(start, end):
        hit = simd.shuffle(lane == (cells[t] & (LANES - 1)), TILE)
        line = simd.select(hit, simd.shuffle(gathered[q, t, :], SPREAD), line)
    return line


@kernel(name="pillars.scatter_lines")
def scatter_lines(
        features: Buf[f32, None, "channels", In(doc="PFN output", rows="count")],
        coords: Buf[i32, None, 3, In("cells (z, y, x)", rows="count")],
        count: i64[In("pillars")],
        bev: Buf[f32, State(doc="the BEV map; holds the previous frame on entry (zero-initialise "
                            "once, 64-byte aligned)", shape=("channels", "ny", "nx"))],
        prev_cells: Buf[i32, State("lines", "the previous frame's sorted lines "
                                   "(zero-initialise)", rows="max_pillars + 1")],
        prev_count: Buf[i64, 1, State("lines", "zero-initialise")],
        bitmap: Buf[i64, State(doc="all zero on entry and exit (zero-initialise)",
                               rows="(ny * nx + 63) / 64", dtype="u64")],
        cell_pillar: Buf[i32, Scratch("pillar id", rows="ny * nx")],
        cells: Buf[i32, Scratch("cells", rows="max_pillars")],
        pids: Buf[i32, Scratch("pillar id", rows="max_pillars")],
        union_lines: Buf[i32, Scratch("lines", rows="2 * max_pillars")],
        union_ends: Buf[i32, Scratch(rows="2 * max_pillars")],
        gathered: Buf[f32, None, "max_pillars", LANES, Scratch(doc="64-byte aligned",
                                                               rows="channels / 16")],
        rank: Buf[i32, Scratch(rows="max_pillars")], *, channels: int, nx: int, ny: int,
        max_pillars: int, stream: bool):
    mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx, ny)
    n_union = union_of_lines(prev_cells, prev_count[0], cells, count, union_lines, union_ends)
    keep_lines(union_lines, union_ends, n_union, prev_cells, prev_count)
    gather(features, pids, rank, count, gathered, channels)
    lane = simd.iota(i32, LANES)
    store = simd.stream_store if stream else simd.store
    for q in range(channels // LANES):
        start = 0
        for k in range(n_union):
            line = compose(gathered, q, cells, start, i64(union_ends[k]), lane)
            at = q * LANES * nx * ny + i64(union_lines[k]) * LANES
            for c in unroll(LANES):
                store(bev, at + c * nx * ny, simd.slice(line, c * LANES, LANES))
            start = i64(union_ends[k])
    if stream:
        simd.fence()  # orders the streaming stores before any later load (mfence on x86)


def lines_fit(config: PillarConfig) -> bool:
    """Whether this kernel can serve the grid: whole channel chunks and whole lines."""
    return config.num_features % LANES == 0 and (config.nx * config.ny) % LANES == 0


def scatter_lines_spec(config: PillarConfig, stream: bool = True) -> KernelSpec:
    """The whole-line scatter kernel for one grid (``stream``: non-temporal stores)."""
    if not lines_fit(config):
        raise ValueError(f"scatter_lines: channels {config.num_features} and nx * ny = "
                         f"{config.nx * config.ny} must be multiples of {LANES}")
    return scatter_lines.spec(channels=config.num_features, nx=config.nx, ny=config.ny,
                              max_pillars=config.max_pillars, stream=stream)
