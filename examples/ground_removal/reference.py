"""The numpy twin of `kernel.remove_ground`: same signature, same float32 arithmetic."""

from __future__ import annotations

import numpy as np


def cell_of(points: np.ndarray, x0: float, y0: float, cell: float, nx: int, ny: int):
    """(cell index int64 [N], valid bool [N]): the grid cell of each point, and whether the
    point is inside the grid with a finite height (float32 arithmetic, as the kernel)."""
    fx = (points[:, 0] - np.float32(x0)) / np.float32(cell)
    fy = (points[:, 1] - np.float32(y0)) / np.float32(cell)
    z = points[:, 2]
    with np.errstate(invalid="ignore"):
        valid = (fx >= 0) & (fx < nx) & (fy >= 0) & (fy < ny) & (z - z == 0)
    ix = np.where(valid, fx, 0).astype(np.int64)
    iy = np.where(valid, fy, 0).astype(np.int64)
    return iy * nx + ix, valid


def remove_ground(points: np.ndarray, n: int, lowest: np.ndarray, out: np.ndarray, *,
                  x0: float, y0: float, cell: float, nx: int, ny: int, height: float,
                  capacity: int, cells: int) -> int:
    """Keep the points at least ``height`` m above the lowest point of their grid cell.

    points float32 [n, 4] (x, y, z, r; metres, LiDAR frame); lowest float32 [cells = ny * nx]
    scratch; out float32 [capacity, 4]: the kept points, in input order. Returns how many points passed
    (may exceed ``capacity``: only the first ``capacity`` are written). Points outside the grid
    or with a non-finite coordinate are dropped.
    """
    pts = points[:n]
    index, valid = cell_of(pts, x0, y0, cell, nx, ny)
    flat = lowest[:cells]
    flat[:] = np.inf
    np.minimum.at(flat, index[valid], pts[valid, 2])
    with np.errstate(invalid="ignore"):
        keep = valid & (pts[:, 2] >= flat[index] + np.float32(height))
    kept = pts[keep]
    out[:min(len(kept), capacity)] = kept[:capacity]
    return len(kept)
