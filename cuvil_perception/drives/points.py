"""Velodyne ``.bin`` scans: N x 4 float32 rows (x, y, z, reflectance), little-endian.

Coordinates are in the velodyne frame (x forward, y left, z up, metres); reflectance is in
[0, 1]. Rows with a NaN or infinite value are dropped and counted, not treated as an error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DriveError

ROW_BYTES = 16  # 4 x float32


def read_points(path: Path) -> tuple[np.ndarray, int]:
    """(points float32 [N, 4] C-contiguous, number of rows dropped for NaN/inf)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DriveError(f"{path}: cannot read point file ({exc.strerror or exc})") from None
    if len(raw) % ROW_BYTES:
        raise DriveError(f"{path}: size {len(raw)} bytes is not a multiple of {ROW_BYTES} "
                         "(N x 4 float32 expected)")
    points = np.frombuffer(raw, dtype="<f4").reshape(-1, 4)
    finite = np.isfinite(points).all(axis=1)
    dropped = int(points.shape[0] - np.count_nonzero(finite))
    points = points[finite] if dropped else points.copy()
    return np.ascontiguousarray(points, dtype=np.float32), dropped


def write_points(path: Path, points: np.ndarray) -> None:
    """Write [N, 4] points as a KITTI ``.bin`` (float32 little-endian, row-major)."""
    Path(path).write_bytes(np.ascontiguousarray(points, dtype="<f4").tobytes())
