"""The kernels of _user_kernels.py written for numba (benchmark only; see vs_numba.py): the same
algorithm statement for statement, ``@njit`` without fastmath, float32 constants made explicit
(numba would widen ``x / PI`` to float64 with a Python float). Static parameters are module
constants, as numba users bake them in; the letterbox geometry is a run-time argument tuple
(one compiled function serves every image size, as numba users write it)."""

from __future__ import annotations

import math

import numba
import numpy as np

from _user_kernels import FOV_DOWN, FOV_UP, LB_PAD, RI_H, RI_W, VOX_CAP, VOX_LO, VOX_N, VOX_SIZE

F = np.float32
PI, BOTTOM, FOV = F(math.pi), F(FOV_DOWN), F(FOV_UP - FOV_DOWN)
LX, LY, LZ, SIZE = F(VOX_LO[0]), F(VOX_LO[1]), F(VOX_LO[2]), F(VOX_SIZE)
NX, NY, NZ = VOX_N
FNX, FNY, FNZ = F(NX), F(NY), F(NZ)
FILL = F(LB_PAD) / F(255.0)


@numba.njit(nogil=True, cache=True)
def range_image(points, n, depth, index):
    for row in range(RI_H):
        for col in range(RI_W):
            depth[row, col] = -1.0
            index[row, col] = -1
    for i in range(n):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        flat = math.sqrt(x * x + y * y)
        r = math.sqrt(x * x + y * y + z * z)
        yaw = math.atan2(y, x)
        pitch = math.atan2(z, flat)
        fu = F(0.5) * (F(1.0) - yaw / PI) * F(RI_W)
        fv = (F(1.0) - (pitch - BOTTOM) / FOV) * F(RI_H)
        u = min(max(np.int32(math.floor(fu)), 0), RI_W - 1)
        v = min(max(np.int32(math.floor(fv)), 0), RI_H - 1)
        if r > 0.0 and (depth[v, u] < 0.0 or r < depth[v, u]):
            depth[v, u] = r
            index[v, u] = i


@numba.njit(nogil=True, cache=True)
def voxel_centroids(points, n, grid, sums, counts, cell_of, centroids):
    m = 0
    for i in range(n):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        fx, fy, fz = (x - LX) / SIZE, (y - LY) / SIZE, (z - LZ) / SIZE
        if fx >= 0.0 and fx < FNX and fy >= 0.0 and fy < FNY and fz >= 0.0 and fz < FNZ:
            cell = (np.int32(fz) * NY + np.int32(fy)) * NX + np.int32(fx)
            k = grid[cell]
            if k < 0:
                if m >= VOX_CAP:
                    continue
                k = m
                grid[cell], cell_of[k] = k, cell
                sums[k, 0], sums[k, 1], sums[k, 2], counts[k] = 0.0, 0.0, 0.0, 0
                m += 1
            sums[k, 0], sums[k, 1], sums[k, 2] = sums[k, 0] + x, sums[k, 1] + y, sums[k, 2] + z
            counts[k] += 1
    for k in range(m):
        c = F(counts[k])
        centroids[k, 0], centroids[k, 1], centroids[k, 2] = \
            sums[k, 0] / c, sums[k, 1] / c, sums[k, 2] / c
        grid[cell_of[k]] = -1
    return m


@numba.njit(nogil=True, cache=True)
def letterbox(image, out, geometry):
    h, w, size, nh, nw, top, left = geometry
    for c in range(3):
        for y in range(size):
            for x in range(size):
                out[c, y, x] = FILL
    ry, rx = F(h) / F(nh), F(w) / F(nw)
    for oy in range(nh):
        sy = max((F(oy) + F(0.5)) * ry - F(0.5), F(0.0))
        y0 = np.int32(sy)
        fy = sy - F(y0)
        y1 = min(y0 + 1, h - 1)
        for ox in range(nw):
            sx = max((F(ox) + F(0.5)) * rx - F(0.5), F(0.0))
            x0 = np.int32(sx)
            fx = sx - F(x0)
            x1 = min(x0 + 1, w - 1)
            for c in range(3):
                a, b = F(image[y0, x0, 2 - c]), F(image[y0, x1, 2 - c])
                d, e = F(image[y1, x0, 2 - c]), F(image[y1, x1, 2 - c])
                upper = a + (b - a) * fx
                lower = d + (e - d) * fx
                out[c, oy + top, ox + left] = (upper + (lower - upper) * fy) / F(255.0)


def letterbox_call(image: np.ndarray, out: np.ndarray, static: dict) -> None:
    """numba's letterbox with the geometry ``_user_kernels.letterbox_geometry`` gives."""
    letterbox(image, out, tuple(static[k] for k in ("h", "w", "size", "nh", "nw", "top",
                                                      "left")))
