"""The ``bag`` source: a ROS bag or MCAP file replayed as a drive; the ``replay`` source with
the bag-only params (both open a path through ``drives.registry``, which tells a bag from a
KITTI-raw folder by content, so ``--replay FILE`` works for both).

``bag`` has the ports of ``replay`` (image, points, P2, R0_rect, Tr_velo_to_cam, labels,
dropped_points; labels are empty: bags carry no ground truth) plus the parameters that only
make sense for a bag: which topic feeds which stream and which clock stamps them. The intensity
rule (``intensity_scale``, null: by the field's type and values, see ``drives/bag/intensity``)
is a ``replay`` param, so ``--replay BAG --set drive.intensity_scale=F`` works on the shipped
configs too. See ``drives/bag`` for the message types and how topics are chosen.
"""

from __future__ import annotations

from pathlib import Path

from ..graph import Param, ParamProblem, register
from .replay_camera import Replay


@register
class Bag(Replay):
    """Frames of a ROS 2 (MCAP, sqlite3) or ROS 1 bag: one per point cloud that has a camera
    image within ``sync_tolerance_ms`` (the KITTI replay's rule), calibration from CameraInfo
    and tf. Deterministic like ``replay``; ``loop`` repeats the bag."""

    name = "bag"
    doc = ("Replay a ROS 2 bag (MCAP or sqlite3) or a ROS 1 bag: PointCloud2, Image or "
           "CompressedImage, CameraInfo and tf, synchronised.")
    params = (
        Param("path", Path, None, "bag file (.mcap, .db3, .bag) or rosbag2 folder, recognised "
              "by content; --replay sets it", optional=True),
        Param("topics", dict, {}, "topic per stream: {points: T, image: T, camera_info: T}; a "
              "stream left out takes the only topic of its type"),
        Param("stamp", str, "header", "message time: header (header.stamp) or log (the bag's "
              "record time)", choices=("header", "log")),
    ) + tuple(p for p in Replay.params if p.name != "path")  # intensity_scale, sync..., loop

    def check(self) -> None:
        super().check()
        from ..drives.bag import ROLES

        for role, topic in (self.p.get("topics") or {}).items():
            if role not in ROLES:
                raise ParamProblem("topics", f"unknown stream '{role}' (streams: "
                                   f"{', '.join(ROLES)})")
            if not isinstance(topic, str) or not topic.strip():
                raise ParamProblem("topics", f"topics.{role} must be a topic name, got "
                                   f"{topic!r}")
