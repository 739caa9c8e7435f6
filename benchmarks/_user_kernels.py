"""Three kernels of the kinds users write, in the kernel language, with their numpy references
(benchmark + test helpers: benchmarks/vs_numba.py times them against the same algorithm in
numba, tests/test_user_kernels.py checks them against the references).

- ``range_image``: a LiDAR scan projected to a [h, w] spherical range image (HDL-64E field of
  view), the nearest point kept per pixel (ties: the first in scan order).
- ``voxel_centroids``: the centroid of the points of each occupied voxel of a grid, voxels in
  order of first appearance (a downsampling voxel filter).
- ``letterbox``: a BGR uint8 image resized (bilinear, half-pixel centres) into a padded square,
  RGB planes float32 / 255 (a detector's input).

All float arithmetic is float32 without fast-math flags (every operation rounds on its own), so
the compiled kernel, ``py_func``, numba's twin and the numpy reference give the same bits.
"""

from __future__ import annotations

import math

import numpy as np

from cuvil_perception.compile.lang import Buf, f32, i32, i64, kernel, kmath, u8, unroll

# range image: KITTI's HDL-64E (RangeNet++'s projection)
RI_H, RI_W = 64, 2048
FOV_UP, FOV_DOWN = math.radians(3.0), math.radians(-25.0)
# voxel grid: 0.4 m voxels over the KITTI pillar range
VOX_LO, VOX_SIZE, VOX_N = (0.0, -39.68, -3.0), 0.4, (173, 199, 10)
VOX_CAP = 30000
# letterbox: YOLOv8's 640 square, pad 114
LB_SIZE, LB_PAD = 640, 114


@kernel(name="bench.range_image")
def range_image(points: Buf[f32, "n", 4], n: i64, depth: Buf[f32, "h", "w"],
                index: Buf[i32, "h", "w"], *, h: int, w: int, up: float, down: float):
    """depth[v, u] = the range (m) of the nearest point projected to pixel (v, u), -1 where
    none; index[v, u] its row in ``points``, -1 where none."""
    for row in range(h):
        for col in range(w):
            depth[row, col] = -1.0
            index[row, col] = -1
    pi, bottom, fov = f32(math.pi), f32(down), f32(up - down)
    for i in range(n):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        flat = kmath.sqrt(x * x + y * y)
        r = kmath.sqrt(x * x + y * y + z * z)
        yaw = kmath.atan2(y, x)
        pitch = kmath.atan2(z, flat)
        fu = f32(0.5) * (f32(1.0) - yaw / pi) * f32(w)
        fv = (f32(1.0) - (pitch - bottom) / fov) * f32(h)
        u = min(max(i32(kmath.floor(fu)), 0), w - 1)
        v = min(max(i32(kmath.floor(fv)), 0), h - 1)
        if r > 0.0 and (depth[v, u] < 0.0 or r < depth[v, u]):
            depth[v, u] = r
            index[v, u] = i32(i)


# slp=False: LLVM's SLP vectoriser packs the point's x, y, z (subtract, divide, range compares)
# into one vector and unpacks it again for the cell index; in this latency-bound loop (one
# random grid access a point) the shuffles cost more than the three scalar chains on Zen 3
# (--cpu znver3: 7-10 % slower than without it; ~2.5 % faster with it on Zen 4). numba has no
# SLP by default. (vs_numba.py; AMD EPYC Zen 4 AVX-512 VNNI, code for znver3 and znver4.)
@kernel(name="bench.voxel_centroids", slp=False)
def voxel_centroids(points: Buf[f32, "n", 4], n: i64, grid: Buf[i32, "cells"],
                    sums: Buf[f32, "cap", 3], counts: Buf[i32, "cap"], cell_of: Buf[i32, "cap"],
                    centroids: Buf[f32, "cap", 3], *, lo: tuple, size: float, nx: int, ny: int,
                    nz: int, cap: int, cells: int) -> i64:
    """centroids[k] = the mean xyz of the points of the k-th voxel to appear (at most ``cap``
    voxels; points of later new voxels are dropped); returns the voxel count. ``grid`` must be
    -1 everywhere on entry and is on exit; ``sums``, ``counts``, ``cell_of`` are scratch."""
    m = 0
    for i in range(n):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        fx, fy, fz = (x - f32(lo[0])) / f32(size), (y - f32(lo[1])) / f32(size), \
            (z - f32(lo[2])) / f32(size)
        if fx >= 0.0 and fx < f32(nx) and fy >= 0.0 and fy < f32(ny) and fz >= 0.0 and \
                fz < f32(nz):
            cell = (i32(fz) * ny + i32(fy)) * nx + i32(fx)
            k = i64(grid[cell])
            if k < 0:
                if m >= cap:
                    continue
                k = m
                grid[cell], cell_of[k] = i32(k), cell
                sums[k, 0], sums[k, 1], sums[k, 2], counts[k] = 0.0, 0.0, 0.0, 0
                m += 1
            sums[k, 0], sums[k, 1], sums[k, 2] = sums[k, 0] + x, sums[k, 1] + y, sums[k, 2] + z
            counts[k] += 1
    for k in range(m):
        c = f32(counts[k])
        centroids[k, 0], centroids[k, 1], centroids[k, 2] = \
            sums[k, 0] / c, sums[k, 1] / c, sums[k, 2] / c
        grid[cell_of[k]] = -1
    return m


@kernel(name="bench.letterbox")
def letterbox(image: Buf[u8, "h", "w", 3], out: Buf[f32, 3, "size", "size"], *, h: int, w: int,
              size: int, nh: int, nw: int, top: int, left: int, pad: int):
    """out = the image resized to (nh, nw) bilinearly (half-pixel centres, edge-clamped), at
    (top, left) in a ``size`` square of ``pad``, RGB planes / 255."""
    fill = f32(pad) / f32(255.0)
    for c in range(3):
        for y in range(size):
            for x in range(size):
                out[c, y, x] = fill
    ry, rx = f32(h) / f32(nh), f32(w) / f32(nw)
    for oy in range(nh):
        sy = max((f32(oy) + f32(0.5)) * ry - f32(0.5), f32(0.0))
        y0 = i32(sy)
        fy = sy - f32(y0)
        y1 = min(y0 + 1, h - 1)
        for ox in range(nw):
            sx = max((f32(ox) + f32(0.5)) * rx - f32(0.5), f32(0.0))
            x0 = i32(sx)
            fx = sx - f32(x0)
            x1 = min(x0 + 1, w - 1)
            for c in unroll(3):
                a, b = f32(image[y0, x0, 2 - c]), f32(image[y0, x1, 2 - c])
                d, e = f32(image[y1, x0, 2 - c]), f32(image[y1, x1, 2 - c])
                upper = a + (b - a) * fx
                lower = d + (e - d) * fx
                out[c, oy + top, ox + left] = (upper + (lower - upper) * fy) / f32(255.0)


# ---- static parameters and arrays for one input ------------------------------------------

def range_image_args(points: np.ndarray) -> tuple[tuple, dict]:
    """(arguments, static keywords) of ``range_image`` for a scan (fresh output arrays)."""
    depth = np.empty((RI_H, RI_W), np.float32)
    index = np.empty((RI_H, RI_W), np.int32)
    return (points, len(points), depth, index), dict(h=RI_H, w=RI_W, up=FOV_UP, down=FOV_DOWN)


def voxel_args(points: np.ndarray) -> tuple[tuple, dict]:
    nx, ny, nz = VOX_N
    grid = np.full(nx * ny * nz, -1, np.int32)
    scratch = (np.zeros((VOX_CAP, 3), np.float32), np.zeros(VOX_CAP, np.int32),
               np.zeros(VOX_CAP, np.int32), np.zeros((VOX_CAP, 3), np.float32))
    return (points, len(points), grid, *scratch), dict(lo=VOX_LO, size=VOX_SIZE, nx=nx, ny=ny,
                                                       nz=nz, cap=VOX_CAP, cells=nx * ny * nz)


def letterbox_geometry(h: int, w: int, size: int = LB_SIZE) -> dict:
    """ultralytics' LetterBox(size, auto=False) geometry as static keywords."""
    r = min(size / h, size / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = (size - nw) / 2, (size - nh) / 2
    return dict(h=h, w=w, size=size, nh=nh, nw=nw, top=int(round(dh - 0.1)),
                left=int(round(dw - 0.1)), pad=LB_PAD)


def letterbox_args(image: np.ndarray, size: int = LB_SIZE) -> tuple[tuple, dict]:
    static = letterbox_geometry(*image.shape[:2], size)
    return (image, np.empty((3, static["size"], static["size"]), np.float32)), static


# ---- numpy references (vectorised: another route to the same numbers) --------------------

def range_image_reference(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth, index) as ``range_image`` defines them."""
    f = np.float32
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    flat, r = np.sqrt(x * x + y * y), np.sqrt(x * x + y * y + z * z)
    yaw, pitch = _atan2f(y, x), _atan2f(z, flat)
    fu = f(0.5) * (f(1.0) - yaw / f(math.pi)) * f(RI_W)
    fv = (f(1.0) - (pitch - f(FOV_DOWN)) / f(FOV_UP - FOV_DOWN)) * f(RI_H)
    with np.errstate(invalid="ignore"):
        u = np.clip(_to_i32(np.floor(fu)), 0, RI_W - 1)
        v = np.clip(_to_i32(np.floor(fv)), 0, RI_H - 1)
    keep = np.flatnonzero(r > 0)
    pixel = v[keep] * RI_W + u[keep]
    order = np.lexsort((keep, r[keep], pixel))  # by pixel, then range, then scan order
    first = np.ones(len(order), bool)
    first[1:] = pixel[order][1:] != pixel[order][:-1]
    depth, index = np.full(RI_H * RI_W, -1, np.float32), np.full(RI_H * RI_W, -1, np.int32)
    depth[pixel[order][first]] = r[keep][order][first]
    index[pixel[order][first]] = keep[order][first]
    return depth.reshape(RI_H, RI_W), index.reshape(RI_H, RI_W)


def voxel_reference(points: np.ndarray) -> np.ndarray:
    """centroids [m, 3] float32 as ``voxel_centroids`` defines them (m <= VOX_CAP)."""
    xyz = points[:, :3]
    f = (xyz - np.float32(VOX_LO)) / np.float32(VOX_SIZE)
    with np.errstate(invalid="ignore"):
        inside = np.all((f >= 0) & (f < np.array(VOX_N, np.float32)), axis=1)
    cell_idx = f[inside].astype(np.int32)
    nx, ny, _ = VOX_N
    cell = (cell_idx[:, 2] * ny + cell_idx[:, 1]) * nx + cell_idx[:, 0]
    cells, first, inverse = np.unique(cell, return_index=True, return_inverse=True)
    rank = np.empty(len(cells), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(cells))
    voxel = rank[inverse]
    kept = voxel < VOX_CAP
    sums = np.zeros((min(len(cells), VOX_CAP), 3), np.float32)
    np.add.at(sums, voxel[kept], xyz[inside][kept])  # in scan order, float32, as the kernel
    counts = np.bincount(voxel[kept], minlength=len(sums)).astype(np.float32)
    return sums / counts[:, None]


def letterbox_reference(image: np.ndarray, size: int = LB_SIZE) -> np.ndarray:
    """The [3, size, size] float32 planes ``letterbox`` defines."""
    g = letterbox_geometry(*image.shape[:2], size)
    f = np.float32
    h, w, nh, nw = g["h"], g["w"], g["nh"], g["nw"]
    sy = np.maximum((np.arange(nh, dtype=f) + f(0.5)) * (f(h) / f(nh)) - f(0.5), f(0))
    sx = np.maximum((np.arange(nw, dtype=f) + f(0.5)) * (f(w) / f(nw)) - f(0.5), f(0))
    y0, x0 = sy.astype(np.int32), sx.astype(np.int32)
    fy, fx = (sy - y0.astype(f))[:, None], (sx - x0.astype(f))[None, :]
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    out = np.full((3, g["size"], g["size"]), f(g["pad"]) / f(255), f)
    for c in range(3):
        plane = image[:, :, 2 - c].astype(f)
        a, b = plane[y0][:, x0], plane[y0][:, x1]
        d, e = plane[y1][:, x0], plane[y1][:, x1]
        upper, lower = a + (b - a) * fx, d + (e - d) * fx
        out[c, g["top"]:g["top"] + nh, g["left"]:g["left"] + nw] = \
            (upper + (lower - upper) * fy) / f(255)
    return out


def _atan2f(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The C library's atan2f, element by element (numpy's float32 arctan2 differs in the
    last bit; the kernels call the C library's)."""
    return kmath._libm("atan2", np.arctan2(y, x), y, x)


def _to_i32(values: np.ndarray) -> np.ndarray:
    """A float -> i32 cast as the kernel's: truncating, saturating, NaN -> 0."""
    out = np.nan_to_num(values, nan=0.0, posinf=2**31 - 1, neginf=-2**31)
    return np.clip(out, -2**31, 2**31 - 1).astype(np.int32)
