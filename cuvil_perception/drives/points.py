"""Velodyne ``.bin`` scans: N x 4 float32 rows (x, y, z, reflectance), little-endian.

Coordinates are in the velodyne frame (x forward, y left, z up, metres); reflectance is in
[0, 1]. What a broken sensor or file can put there is handled, never passed on as garbage:

* a row with a NaN or infinite value, or a coordinate beyond `MAX_REACH_M` (no LiDAR sees
  1 km; such values are bit rot) is dropped and counted (``dropped``);
* a reflectance outside [0, 1] is clamped into it and counted (`clamp_reflectance`): the
  point's geometry is real, and a detector fed 1e30 would turn it into boxes at 1e28 m. The
  replay source warns once per run, naming the file (a sensor reporting 0..255 intensities
  needs them divided by 255 when the drive is written).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DriveError

ROW_BYTES = 16  # 4 x float32
MAX_REACH_M = 1000.0  # |x|, |y|, |z| beyond this are not measurements


def read_points(path: Path) -> tuple[np.ndarray, int]:
    """(points float32 [N, 4] C-contiguous, number of rows dropped: NaN/inf anywhere, or a
    coordinate beyond ``MAX_REACH_M``). Reflectance is left as stored: see `clamp_reflectance`."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DriveError(f"{path}: cannot read point file ({exc.strerror or exc})") from None
    if len(raw) % ROW_BYTES:
        raise DriveError(f"{path}: size {len(raw)} bytes is not a multiple of {ROW_BYTES} "
                         "(N x 4 float32 expected)")
    return keep_measured(np.frombuffer(raw, dtype="<f4").reshape(-1, 4))


def check_scan_sizes(paths) -> None:
    """DriveError naming the first scan whose size is not a multiple of ``ROW_BYTES`` (one
    ``stat`` per file: the drive's index catches a cut file before frame 0, for inspect too)."""
    for path in paths:
        try:
            size = os.stat(path).st_size
        except OSError as exc:
            raise DriveError(f"{path}: cannot read point file ({exc.strerror or exc})") from None
        if size % ROW_BYTES:
            raise DriveError(f"{path}: size {size} bytes is not a multiple of {ROW_BYTES} "
                             "(N x 4 float32 expected)")


def keep_measured(points: np.ndarray) -> tuple[np.ndarray, int]:
    """(a float32 [N', 4] C-contiguous copy of the rows of ``points`` [N, 4] that can be
    measurements, number of rows dropped): a NaN/inf anywhere, or a coordinate beyond
    ``MAX_REACH_M``, drops the row. Every reader (KITTI ``.bin``, bag PointCloud2) uses this."""
    with np.errstate(invalid="ignore"):  # NaN compares False: those rows go anyway
        keep = np.isfinite(points).all(axis=1) & (np.abs(points[:, :3]) <= MAX_REACH_M).all(1)
    dropped = int(points.shape[0] - np.count_nonzero(keep))
    points = points[keep] if dropped else points.copy()
    return np.ascontiguousarray(points, dtype=np.float32), dropped


def clamp_reflectance(points: np.ndarray) -> int:
    """Clamp column 3 of float32 [N, 4] ``points`` into [0, 1] in place; returns rows changed."""
    reflectance = points[:, 3]
    outside = int(np.count_nonzero((reflectance < 0.0) | (reflectance > 1.0)))
    if outside:
        np.clip(reflectance, 0.0, 1.0, out=reflectance)
    return outside


def write_points(path: Path, points: np.ndarray) -> None:
    """Write [N, 4] points as a KITTI ``.bin`` (float32 little-endian, row-major)."""
    Path(path).write_bytes(np.ascontiguousarray(points, dtype="<f4").tobytes())
