"""The three user-style kernels of benchmarks/_user_kernels.py (range image, voxel centroids,
letterbox; benchmarks/vs_numba.py times them against numba) equal their numpy references
bitwise, compiled and uncompiled, on KITTI scans and the two photos (seeded random data where
../shared/data is missing), and on edge inputs (empty scan, non-finite points, points outside
the grid, a tiny image)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
sys.path.insert(0, str(BENCH))
import _user_kernels as uk  # noqa: E402


def _scans() -> list[np.ndarray]:
    frames = sorted((DATA / "kitti_velodyne").glob("*.bin"))[:2]
    if frames:
        return [np.fromfile(f, np.float32).reshape(-1, 4) for f in frames]
    rng = np.random.default_rng(0)
    return [rng.uniform([-70, -40, -3, 0], [70, 40, 1, 1], (20000, 4)).astype(np.float32)]


def _odd_scan() -> np.ndarray:
    """Points on the voxel grid's edges, outside it, at the origin, and not finite."""
    rng = np.random.default_rng(5)
    pts = rng.uniform([-5, -45, -4, 0], [75, 45, 2, 1], (3000, 4)).astype(np.float32)
    pts[:10, :3] = 0.0  # range 0: no pixel
    pts[10:20, 0] = np.nan
    pts[20:30, 1] = np.inf
    pts[30:40, :3] = np.float32(uk.VOX_LO)  # the grid's lower corner (inside)
    pts[40:50, 2] = -np.inf
    pts[50:60] = pts[60:70]  # duplicates: ties keep the first in scan order
    return pts


def _both(kernel, pts: np.ndarray) -> tuple:
    """The compiled kernel, and uncompiled on the small scans (a Python loop per point)."""
    return (kernel, kernel.py_func) if len(pts) <= 5000 else (kernel,)


SCANS = _scans() + [_odd_scan(), np.zeros((0, 4), np.float32)]


@pytest.mark.parametrize("k", range(len(SCANS)))
def test_range_image_equals_reference(k):
    pts = SCANS[k]
    want = uk.range_image_reference(pts)
    for fn in _both(uk.range_image, pts):
        args, static = uk.range_image_args(pts)
        with np.errstate(invalid="ignore"):
            fn(*args, **static)
        assert np.array_equal(args[2], want[0]) and np.array_equal(args[3], want[1])


@pytest.mark.parametrize("k", range(len(SCANS)))
def test_voxel_centroids_equal_reference(k):
    pts = SCANS[k]
    want = uk.voxel_reference(pts)
    for fn in _both(uk.voxel_centroids, pts):
        args, static = uk.voxel_args(pts)
        with np.errstate(invalid="ignore"):
            m = fn(*args, **static)
        assert m == len(want) and np.array_equal(args[6][:m], want)
        assert np.all(args[2] == -1)  # the grid is left as found


def _images() -> list[np.ndarray]:
    import cv2

    found = [cv2.imread(str(p)) for p in sorted((DATA / "yolov8").glob("*.jpg"))]
    rng = np.random.default_rng(1)
    return [f for f in found if f is not None] + [rng.integers(0, 256, (7, 5, 3), np.uint8),
                                                   rng.integers(0, 256, (9, 31, 3), np.uint8)]


@pytest.mark.parametrize("image", _images(), ids=lambda im: "x".join(map(str, im.shape[:2])))
def test_letterbox_equals_reference(image):
    want = uk.letterbox_reference(image)
    args, static = uk.letterbox_args(image)
    uk.letterbox(*args, **static)
    assert np.array_equal(args[1], want)
    if image.size < 1000:  # uncompiled (a Python loop per pixel): into a 24 square
        want = uk.letterbox_reference(image, 24)
        for fn in (uk.letterbox, uk.letterbox.py_func):
            args, static = uk.letterbox_args(image, 24)
            fn(*args, **static)
            assert np.array_equal(args[1], want)
