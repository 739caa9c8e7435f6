"""Which topic of a bag feeds which stream of the replay source.

Roles and the message types they accept:

=============  ======================================================================
role           types
=============  ======================================================================
``points``     sensor_msgs/msg/PointCloud2
``image``      sensor_msgs/msg/Image, sensor_msgs/msg/CompressedImage
``camera_info``  sensor_msgs/msg/CameraInfo
=============  ======================================================================

A role given in the pipeline (``topics: {points: /velodyne_points}``) must name a topic of the
bag with an accepted type. A role not given is filled when exactly one topic has an accepted
type (and a note says so); several candidates are an error listing them, except for
``camera_info``, where the one beside the image topic (same namespace, as image_transport
publishes them) is taken. Transforms come from every tf2_msgs/msg/TFMessage topic
(``/tf`` and ``/tf_static``).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import DriveError

ROLE_TYPES = {
    "points": ("sensor_msgs/msg/PointCloud2",),
    "image": ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"),
    "camera_info": ("sensor_msgs/msg/CameraInfo",),
}
TF_TYPE = "tf2_msgs/msg/TFMessage"
ROLES = tuple(ROLE_TYPES)


def _namespace(topic: str) -> str:
    parts = topic.rstrip("/").split("/")
    if parts[-1] == "compressed":
        parts = parts[:-1]
    return "/".join(parts[:-1])


def _listing(names) -> str:
    return ", ".join(names) if names else "none"


def select_topics(topics: dict, requested: dict[str, str], path: Path
                  ) -> tuple[dict[str, str], list[str]]:
    """({role: topic name}, notes) for the three roles; DriveError naming the bag otherwise.

    ``topics`` maps topic name -> object with ``msgtype``; ``requested`` holds the roles the
    pipeline names.
    """
    chosen: dict[str, str] = {}
    notes: list[str] = []
    for role in ROLES:
        accepted = ROLE_TYPES[role]
        candidates = [n for n, t in topics.items() if t.msgtype in accepted]
        kinds = " or ".join(accepted)
        if role in requested:
            name = requested[role]
            if name not in topics:
                raise DriveError(f"{path}: topics.{role} '{name}' is not in the bag ({kinds} "
                                 f"topics: {_listing(candidates)})")
            if topics[name].msgtype not in accepted:
                raise DriveError(f"{path}: topics.{role} '{name}' is a {topics[name].msgtype}, "
                                 f"not {kinds}")
            chosen[role] = name
            continue
        if role == "camera_info" and len(candidates) > 1 and "image" in chosen:
            beside = [n for n in candidates if _namespace(n) == _namespace(chosen["image"])]
            if len(beside) == 1:
                candidates = beside
        if len(candidates) == 1:
            chosen[role] = candidates[0]
            notes.append(f"{path}: {role} from {candidates[0]} (the only {kinds} topic)")
        elif not candidates:
            raise DriveError(f"{path}: no {kinds} topic for {role} (topics: "
                             f"{_listing(sorted(topics))})")
        else:
            raise DriveError(f"{path}: several {kinds} topics could be {role}: "
                             f"{_listing(candidates)}; choose one with params.topics.{role}")
    return chosen, notes


def tf_topics(topics: dict) -> list[str]:
    """Every TFMessage topic (``/tf``, ``/tf_static``, namespaced ones)."""
    return sorted(n for n, t in topics.items() if t.msgtype == TF_TYPE)
