"""A plain sequential pillarize for numba (benchmark only; see numba_pillarize.py).

KITTI grid baked in as module constants, like our kernel's static parameters.
"""

from __future__ import annotations

import numba
import numpy as np

LOW = np.array([0.0, -39.68, -3.0], np.float32)
HIGH = np.array([69.12, 39.68, 1.0], np.float32)
VOXEL = np.array([0.16, 0.16, 4.0], np.float32)
NX, NY, MAX_PILLARS, MAX_POINTS = 432, 496, 12000, 32


@numba.njit(cache=True, nogil=True)
def pillarize(points, voxels, num_points, coords, grid, cells, over, prev):
    """voxels [P, K, 4], num_points [P], coords [P, 3] hold the previous frame (``prev``
    pillars): cleared here; grid int32 [NY * NX] is -1 on entry and on exit. Returns the count."""
    for p in range(prev):
        voxels[p, :num_points[p]] = 0.0
        num_points[p] = 0
        coords[p] = 0
    count = n_over = 0
    for i in range(points.shape[0]):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        if not (x >= LOW[0] and x < HIGH[0] and y >= LOW[1] and y < HIGH[1]
                and z >= LOW[2] and z < HIGH[2]) or not np.isfinite(points[i, 3]):
            continue
        ix = min(int((x - LOW[0]) / VOXEL[0]), NX - 1)
        iy = min(int((y - LOW[1]) / VOXEL[1]), NY - 1)
        cell = iy * NX + ix
        p = grid[cell]
        if p == -2:
            continue
        if p == -1:
            if count >= MAX_PILLARS:
                grid[cell] = -2
                over[n_over] = cell
                n_over += 1
                continue
            p = count
            grid[cell] = p
            cells[p] = cell
            coords[p, 1], coords[p, 2] = iy, ix
            count += 1
        k = num_points[p]
        if k < MAX_POINTS:
            voxels[p, k] = points[i]
            num_points[p] = k + 1
    for p in range(count):
        grid[cells[p]] = -1
    for k in range(n_over):
        grid[over[k]] = -1
    return count


def make_state() -> list:
    """[voxels, num_points, coords, grid, cells, overflow cells, previous count]."""
    return [np.zeros((MAX_PILLARS, MAX_POINTS, 4), np.float32), np.zeros(MAX_PILLARS, np.int32),
            np.zeros((MAX_PILLARS, 3), np.int32), np.full(NX * NY, -1, np.int32),
            np.zeros(MAX_PILLARS, np.int32), np.zeros(NX * NY, np.int32), 0]


def run(points: np.ndarray, state: list) -> int:
    count = pillarize(points, *state[:6], state[6])
    state[6] = count
    return count
