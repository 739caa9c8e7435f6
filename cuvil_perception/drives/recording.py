"""Open any recorded drive: a KITTI-raw folder or a ROS bag / MCAP file, told apart by content
(``bag.detect``), so ``--replay``, the replay sources and ``render`` take either."""

from __future__ import annotations

from pathlib import Path

from ..errors import DriveError
from .bag.detect import is_bag
from .reader import Drive, drive_image_size


def open_recording(path: Path, sync_tolerance_ms: float = 50.0, *,
                   topics: dict[str, str] | None = None, stamp: str = "header",
                   intensity_scale: float | None = None):
    """``BagDrive`` when ``path`` holds a bag, else the KITTI-raw ``Drive`` (``topics`` and
    ``stamp`` apply to bags only; ``intensity_scale`` to both); DriveError for a file that is
    neither."""
    if is_bag(path):
        from .bag import BagDrive

        return BagDrive(path, sync_tolerance_ms, topics=topics, stamp=stamp,
                        intensity_scale=intensity_scale)
    if Path(path).is_file():
        raise DriveError(f"{path}: neither a drive folder (KITTI raw layout) nor a ROS bag or "
                         "MCAP file (judged by its first bytes)")
    return Drive(path, sync_tolerance_ms, intensity_scale=intensity_scale)


def recording_image_size(path: Path, topics: dict[str, str] | None = None
                         ) -> tuple[int, int] | None:
    """(width, height) of a recording's camera before it is opened, or None."""
    if is_bag(path):
        from .bag import bag_image_size

        return bag_image_size(path, topics)
    return drive_image_size(path)
