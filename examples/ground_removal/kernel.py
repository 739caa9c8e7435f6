"""The native kernel of ground removal, in the kernel language (see reference.py for its twin).

Two passes over the scan: the lowest height of every grid cell, then the points at least
``height`` above their cell's lowest, copied in order. Static parameters (grid origin, cell
size, grid size, threshold, output capacity) are compile-time constants.
"""

from __future__ import annotations

import math

from cuvil_perception.compile.lang import Buf, f32, i32, i64, inline, kernel


@inline
def cell_of(points, i, x0, y0, cell, nx, ny):
    """The flat grid cell (row * nx + column) of point ``i``, or -1 outside the grid or for a
    non-finite point."""
    fx = (points[i, 0] - x0) / cell
    fy = (points[i, 1] - y0) / cell
    z = points[i, 2]
    valid = (fx >= 0.0) & (fx < nx) & (fy >= 0.0) & (fy < ny) & (z - z == 0.0)
    return i32(fy) * nx + i32(fx) if valid else -1


@kernel(name="example.ground_removal")
def remove_ground(points: Buf[f32, "n", 4], n: i64, lowest: Buf[f32, "cells"],
                  out: Buf[f32, "capacity", 4], *, x0: float, y0: float, cell: float, nx: int,
                  ny: int, height: float, capacity: int, cells: int) -> i64:
    for k in range(cells):
        lowest[k] = math.inf
    for i in range(n):  # pass 1: the lowest point of every cell
        c = cell_of(points, i, x0, y0, cell, nx, ny)
        if c >= 0:
            lowest[c] = min(lowest[c], points[i, 2])
    kept = 0
    for i in range(n):  # pass 2: the points above their cell's ground, in order
        c = cell_of(points, i, x0, y0, cell, nx, ny)
        if c >= 0 and points[i, 2] >= lowest[c] + height:
            if kept < capacity:
                out[kept, :] = points[i, :]
            kept += 1
    return kept
