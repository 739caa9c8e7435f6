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

    def __init__(self, kind: str):
        self.name = kind

    def detect(self, path: Path) -> float:
        return 1.0 if recording_kind(path) == self.name else 0.0

    def open(self, path: Path, sync_tolerance_ms: float, options: ReadOptions) -> BagDrive:
        return BagDrive(path, sync_tolerance_ms, topics=options.topics, stamp=options.stamp,
                        intensity_scale=options.intensity_scale)

    def image_size(self, path: Path, options: ReadOptions) -> tuple[int, int] | None:
        return bag_image_size(path, options.topics)


MCAP = BagFormat("mcap")  # ROS 2 MCAP storage, or any MCAP file with ROS 2 messages
SQLITE3 = BagFormat("sqlite3")  # rosbag2 .db3
ROS1 = BagFormat("ros1")  # ROS 1 .bag
ROSBAG2 = BagFormat("rosbag2")  # a rosbag2 folder (metadata.yaml + storage files)
