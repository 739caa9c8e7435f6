"""Which kind of recording a path holds, decided by its bytes (never by its file extension).

=================  =============================================================
kind               how it is recognised
=================  =============================================================
``mcap``           a file starting with the MCAP magic ``\\x89MCAP0\\r\\n``
``sqlite3``        a file starting with ``SQLite format 3\\0`` (rosbag2 ``.db3``)
``ros1``           a file starting with ``#ROSBAG V2.0\\n``
``rosbag2``        a folder holding ``metadata.yaml`` (rosbag2, either storage)
``kitti``          a folder holding ``velodyne_points/`` (KITTI raw layout)
=================  =============================================================
"""

from __future__ import annotations

from pathlib import Path

MCAP_MAGIC = b"\x89MCAP0\r\n"
SQLITE_MAGIC = b"SQLite format 3\x00"
ROS1_MAGIC = b"#ROSBAG V2.0\n"
BAG_KINDS = ("mcap", "sqlite3", "ros1", "rosbag2")


def recording_kind(path: Path) -> str | None:
    """One of ``BAG_KINDS`` or ``"kitti"``, or None when the path is none of them."""
    path = Path(path)
    if path.is_dir():
        if (path / "metadata.yaml").is_file():
            return "rosbag2"
        if (path / "velodyne_points").is_dir():
            return "kitti"
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head.startswith(SQLITE_MAGIC):
        return "sqlite3"
    if head.startswith(ROS1_MAGIC[:13]):
        return "ros1"
    return None


def is_bag(path: Path) -> bool:
    """True when ``path`` is a ROS bag or an MCAP file (judged by content)."""
    return recording_kind(path) in BAG_KINDS
