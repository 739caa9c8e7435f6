"""ROS bags and MCAP files as ``DriveFormat``s: one object per kind ``detect`` tells apart by
content (``MCAP``, ``SQLITE3``, ``ROS1``, ``ROSBAG2``), all read by ``BagDrive``."""

from __future__ import annotations

from pathlib import Path

from ..format import ReadOptions
from .detect import recording_kind
from .drive import BagDrive, bag_image_size


class BagFormat:
    """Bags of one ``kind`` (a ``detect.BAG_KINDS`` entry): sure (1.0) when ``recording_kind``
    names it (magic bytes, or a rosbag2 folder's ``metadata.yaml``), else 0."""

    title = "a ROS bag or MCAP file"

    def __init__(self, kind: str, holds: str, recognised_by: str):
        self.name = kind
        self.holds = holds
        self.recognised_by = recognised_by

    def detect(self, path: Path) -> float:
        return 1.0 if recording_kind(path) == self.name else 0.0

    def open(self, path: Path, sync_tolerance_ms: float, options: ReadOptions) -> BagDrive:
        return BagDrive(path, sync_tolerance_ms, topics=options.topics, stamp=options.stamp,
                        intensity_scale=options.intensity_scale)

    def image_size(self, path: Path, options: ReadOptions) -> tuple[int, int] | None:
        return bag_image_size(path, options.topics)


MCAP = BagFormat("mcap", "MCAP file (ROS 2 storage, or bare MCAP with ROS 2 messages)",
                 r"the magic `\x89MCAP0\r\n` (1)")
SQLITE3 = BagFormat("sqlite3", "rosbag2 sqlite3 file (`.db3`)", r"`SQLite format 3\0` (1)")
ROS1 = BagFormat("ros1", "ROS 1 bag (`.bag`)", r"`#ROSBAG V2.0\n` (1)")
ROSBAG2 = BagFormat("rosbag2", "rosbag2 folder (`metadata.yaml` and its storage files)",
                    "a folder with `metadata.yaml` (1)")
