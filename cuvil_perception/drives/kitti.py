"""The KITTI raw layout as a ``DriveFormat`` (see ``reader.Drive`` and docs/drive-format.md)."""

from __future__ import annotations

from pathlib import Path

from .format import ReadOptions
from .reader import LIDAR_STREAM, Drive, drive_image_size


class KittiRaw:
    """A drive folder in KITTI raw layout. A folder with ``velodyne_points/`` may be one (0.5:
    a layout, not a magic number, so a rosbag2 ``metadata.yaml`` wins); any other path that is
    not a file is tried last (0.1), so ``Drive`` names what is missing."""

    name = "kitti"
    title = "a drive folder (KITTI raw layout)"
    holds = ("KITTI raw folder (above): PNG images, `.bin` scans, timestamps and calibration as "
             "text; read by `drives/reader.py`")
    recognised_by = ("a folder with `velodyne_points/` (0.5); any other path that is not a "
                     "file (0.1): tried as one last, so its reader names what is missing")

    def detect(self, path: Path) -> float:
        path = Path(path)
        if path.is_dir() and (path / LIDAR_STREAM).is_dir():
            return 0.5
        return 0.0 if path.is_file() else 0.1

    def open(self, path: Path, sync_tolerance_ms: float, options: ReadOptions) -> Drive:
        return Drive(path, sync_tolerance_ms, intensity_scale=options.intensity_scale)

    def image_size(self, path: Path, options: ReadOptions) -> tuple[int, int] | None:
        return drive_image_size(path)
