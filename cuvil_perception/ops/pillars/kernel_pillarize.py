"""Native pillarize: a vector pre-pass for the cells, then a branch-light sequential pass.

Signature::

    void pillarize(ptr points f32[n, 4], i64 n,
                   ptr voxels f32[P * K + 4, 4], ptr coords i32[P, 3], ptr num_points i32[P],
                   ptr counts i64[5], ptr grid i16|i32[ny * nx], ptr overflow i32[ny * nx],
                   ptr cells i32[P])

Semantics are ``reference.pillarize``. ``voxels`` is the [P, K, 4] output plus four spare rows
(scratch: a point past the K-th of its pillar, and the zeroing store of a pillar that is not
new, are aimed there instead of branching); 64-byte alignment makes the zeroing stores whole
cache lines. ``cells`` is scratch (each pillar's cell; coords are written from it at the end).
``grid`` is int16 when P < 2**15 (``grid_type``), else int32.

The output buffers are persistent: on entry they hold the previous frame (``counts[0]``
pillars), and only what that frame wrote is cleared (its pillars' filled rows, coords and
counts; the first rows lazily, when this frame takes the same pillar id), so a frame costs
O(points), not O(P * K). ``grid`` must be -1 everywhere on entry and is -1 everywhere on exit:
only the cells touched this frame (the kept pillars' cells and the overflowing cells listed in
``overflow``) are reset. -2 marks a cell whose pillar did not fit.

Why two passes (per block of ``BLOCK`` points, kept in a stack array): the validity test and
the cell arithmetic have no dependence between points, so LLVM vectorises them (16 points per
instruction); what is left for the sequential pass - assign pillar ids in order of first
appearance and append the point - runs without unpredictable branches: a new pillar is a select
(``id = grid == -1 ? count : grid``), the grid and the pillar's cell are stored unconditionally
(the same values for a known pillar) and a full pillar's point goes to a spare row. Only the
rare cases (an invalid or out-of-range point, a full pillar budget) branch. The grid cell of a
point 32 places ahead (known from the pre-pass) and the first voxel line of the pillar id 16
ahead are prefetched: on unrelated frames these are the cache misses left.

No fast-math: the cell of a point is trunc((p - min) / voxel) with IEEE float32 subtract and
divide, exactly what numpy computes.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Scratch, State, f32, i16, i32, i64, inline, kernel, local,
                             select, simd)
from .config import PillarConfig
from .types import COUNT, DROPPED_PILLARS, DROPPED_POINTS, INVALID_POINTS, OUT_OF_RANGE

BLOCK = 512  # points per pre-pass block (2 KB of cell codes on the stack)
GRID_AHEAD = 32  # prefetch the grid cell of the point this many places ahead (same block)
ROWS_AHEAD = 16  # prefetch the first voxel line of the pillar id this many ids ahead
INVALID, OUTSIDE = -1, -2  # cell codes of a non-finite point and of a point out of range


def grid_type(max_pillars: int):
    """int16 when pillar ids fit (half the footprint of the random-access map), else int32."""
    return i16 if max_pillars < 2**15 else i32


@inline
def cell_code(points, i, rng, voxel, nx, ny):
    """The cell of point ``i`` (iy * nx + ix) as i32, or INVALID / OUTSIDE. Branch-free."""
    x, y, z, r = points[i, 0], points[i, 1], points[i, 2], points[i, 3]
    # v - v is 0 for finite v and NaN for NaN or inf; the sum is 0 iff all four are finite.
    finite = (x - x) + (y - y) + ((z - z) + (r - r)) == 0.0
    inside = (x >= rng[0]) & (x < rng[3]) & (y >= rng[1]) & (y < rng[4]) & \
        (z >= rng[2]) & (z < rng[5])
    ix = min(i32((x - rng[0]) / voxel[0]), nx - 1)  # (out of range: never selected)
    iy = min(i32((y - rng[1]) / voxel[1]), ny - 1)
    return select(finite, select(inside, iy * nx + ix, OUTSIDE), INVALID)


@kernel(name="pillars.pillarize", noalias=False)  # noalias lets LLVM vectorise the
# coords loop into masked scatters, which are slower here (Zen 4) than the scalar stores
def pillarize(
        points: Buf[f32, "n", 4, In("m (x, y, z); reflectance 0..1",
                                    "the scan, KITTI .bin layout")],
        n: i64[In("points", "rows of points")],
        voxels: Buf[f32, None, 4, State(
            "m (x, y, z); reflectance", "[max_pillars, max_points, 4] output plus 4 spare rows; "
            "holds the previous frame on entry (zero-initialise once, 64-byte aligned)",
            shape=("max_pillars * max_points + 4", 4))],
        coords: Buf[i32, "max_pillars", 3, State("cells (z, y, x)",
                                                 "cell of each pillar; zero past count")],
        num_points: Buf[i32, "max_pillars", State(
            "points", "real points per pillar (1..max_points); zero past count")],
        counts: Buf[i64, 5, State(
            "pillars, points", "count, dropped_points, dropped_pillars, invalid_points, "
            "out_of_range; counts[0] is the previous frame's pillar count on entry")],
        grid: Buf["gtype", "num_cells", State(
            "pillar id", "-1 everywhere on entry and on exit (initialise once)",
            shape=("ny * nx",))],
        overflow: Buf[i32, "num_cells", Scratch("cells", shape=("ny * nx",))],
        cells: Buf[i32, "max_pillars", Scratch("cells")], *, rng: tuple, voxel: tuple, nx: int,
        ny: int, max_pillars: int, max_points: int, gtype: str, num_cells: int):
    group = 4 if max_points % 4 == 0 else 1  # rows per zeroing store (64 B when 4)
    spare = max_pillars * max_points
    previous = counts[COUNT]
    for p in range(previous):  # the previous frame's rows past the first group
        for k in range(group, num_points[p], group):
            simd.fill(voxels, (p * max_points + k) * 4, 4 * group, 0.0)
    count, dropped, dropped_pillars, invalid, outside, n_over = 0, 0, 0, 0, 0, 0
    codes = local(i32, BLOCK)
    for base in range(0, n, BLOCK):
        size = min(n - base, BLOCK)
        for t in range(size):  # vectorised: validity and cell of every point of the block
            codes[t] = cell_code(points, base + t, rng, voxel, nx, ny)
        for t in range(size):
            simd.prefetch(grid, max(codes[select(t + GRID_AHEAD < size, t + GRID_AHEAD, t)], 0))
            code = codes[t]
            if code < 0:
                invalid += code == INVALID
                outside += code == OUTSIDE
                continue
            current = i32(grid[code])
            is_new = current == -1
            if (current == -2) | (is_new & (count >= max_pillars)):  # rare: no room
                dropped += 1
                if current != -2:
                    grid[code] = -2
                    overflow[n_over] = code
                    n_over += 1
                    dropped_pillars += 1
                continue
            pillar = select(is_new, count, i64(current))
            grid[code] = pillar
            cells[pillar] = code
            simd.prefetch(voxels, (count + ROWS_AHEAD) * max_points * 4)
            count += is_new
            stale = num_points[pillar]
            # a pillar id taken this frame still holds the previous frame's first rows
            row0 = pillar * max_points
            simd.fill(voxels, select(is_new, row0, spare) * 4, 4 * group, 0.0)
            filled = select(is_new, 0, stale)
            room = filled < max_points
            simd.copy(voxels, select(room, row0 + filled, spare) * 4, points, (base + t) * 4, 4)
            num_points[pillar] = filled + room
            dropped += not room
    for p in range(count, previous):  # what the previous frame wrote past this one's pillars
        simd.fill(voxels, p * max_points * 4, 4 * group, 0.0)
        num_points[p] = 0
        coords[p, :] = 0
    for p in range(count):  # all three coords: whole rows vectorise as interleaved stores
        iy = cells[p] // nx
        coords[p, 0], coords[p, 1], coords[p, 2] = 0, iy, cells[p] - iy * nx
    for p in range(count):
        grid[cells[p]] = -1
    for k in range(n_over):
        grid[overflow[k]] = -1
    counts[COUNT], counts[DROPPED_POINTS], counts[DROPPED_PILLARS] = count, dropped, \
        dropped_pillars
    counts[INVALID_POINTS], counts[OUT_OF_RANGE] = invalid, outside


def pillarize_spec(config: PillarConfig) -> KernelSpec:
    """The pillarize kernel for one grid."""
    gtype = grid_type(config.max_pillars).name
    return pillarize.spec(rng=list(config.point_cloud_range), voxel=list(config.voxel_size),
                          nx=config.nx, ny=config.ny, max_pillars=config.max_pillars,
                          max_points=config.max_points_per_pillar, gtype=gtype,
                          num_cells=config.nx * config.ny)
