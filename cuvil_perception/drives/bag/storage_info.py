"""What ``ros2 bag info`` shows of a bag besides its messages: storage id, files, ROS distro, and
per topic the serialization format and the offered QoS profiles.

Where each comes from:

==================  =====================================================================
bag                 storage id / files / serialization / QoS
==================  =====================================================================
rosbag2 folder      ``metadata.yaml``: ``storage_identifier``, ``relative_file_paths``,
                    ``ros_distro``, each topic's ``serialization_format`` and
                    ``offered_qos_profiles`` (a YAML string in older rosbag2, a list in newer)
bare ``.mcap``      ``mcap``; the file; each channel's message encoding and its
                    ``offered_qos_profiles`` metadata (what the rosbag2 MCAP writer stores)
bare ``.db3``       ``sqlite3``; the file; the ``topics`` table's columns of the same names
ROS 1 ``.bag``      ``ros1``; the file; ``ros1``; no QoS (ROS 1 has ``latching`` instead,
                    reported as such)
==================  =====================================================================

QoS profiles are normalised by rosbags' parser (numbers or names, either rosbag2 version) into
dicts with lower-case names: ``{"history": "keep_last", "depth": 10, "reliability":
"reliable", "durability": "transient_local", "deadline": {"sec", "nsec"}, ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

QOS_TIMES = ("deadline", "lifespan", "liveliness_lease_duration")


@dataclass
class StorageInfo:
    """``files``: (path relative to the bag, bytes; None when missing); per topic name:
    ``serialization`` ("cdr", "ros1", ...; "" when unknown), ``qos`` (offered profiles as
    dicts), ``latching`` (ROS 1 topics published latched)."""

    storage_id: str
    files: list[tuple[str, int | None]]
    ros_distro: str | None = None
    serialization: dict[str, str] = field(default_factory=dict)
    qos: dict[str, list[dict]] = field(default_factory=dict)
    latching: set[str] = field(default_factory=set)
    note: str = ""


def storage_info(bag) -> StorageInfo:
    """Read from the opened ``BagFile`` ``bag`` (its connections) and, for a rosbag2 folder,
    its ``metadata.yaml``."""
    path = Path(bag.path)
    if bag.kind == "rosbag2":
        try:
            info = _from_metadata(path)
        except Exception as exc:  # noqa: BLE001 -- the bag opened without it (read front to
            # back): say what is known rather than fail the summary
            info = StorageInfo("?", [(p.name, p.stat().st_size) for p in sorted(path.iterdir())
                                     if p.is_file()])
            info.note = f"metadata.yaml unreadable ({type(exc).__name__}: {exc})"
    else:
        info = StorageInfo(bag.kind, [(path.name, path.stat().st_size)])
    for topic in bag.topics.values():
        for conn in topic.connections:
            _from_connection(info, conn, bag.is_ros1)
    return info


def _from_metadata(folder: Path) -> StorageInfo:
    import yaml

    with open(folder / "metadata.yaml", encoding="utf-8") as f:
        meta = (yaml.safe_load(f) or {}).get("rosbag2_bagfile_information") or {}
    files = []
    for name in meta.get("relative_file_paths") or []:
        file = folder / str(name)
        files.append((str(name), file.stat().st_size if file.is_file() else None))
    info = StorageInfo(str(meta.get("storage_identifier") or "?"), files,
                       meta.get("ros_distro") or None)
    for entry in meta.get("topics_with_message_count") or []:
        topic = (entry or {}).get("topic_metadata") or {}
        name = topic.get("name")
        if not name:
            continue
        info.serialization[name] = str(topic.get("serialization_format") or "")
        if topic.get("offered_qos_profiles"):
            info.qos[name] = [qos_dict(q) for q in _parse_qos(topic["offered_qos_profiles"])]
    return info


def _from_connection(info: StorageInfo, conn, ros1: bool) -> None:
    """Fill what ``metadata.yaml`` did not say from one rosbags connection."""
    ext = getattr(conn, "ext", None)
    if ros1:
        info.serialization.setdefault(conn.topic, "ros1")
        if getattr(ext, "latching", None):
            info.latching.add(conn.topic)
        return
    fmt = getattr(ext, "serialization_format", None)
    if fmt and not info.serialization.get(conn.topic):
        info.serialization[conn.topic] = fmt
    info.serialization.setdefault(conn.topic, "")
    profiles = getattr(ext, "offered_qos_profiles", None)
    if profiles and conn.topic not in info.qos:
        info.qos[conn.topic] = [qos_dict(q) for q in profiles]


def _parse_qos(value):
    from rosbags.rosbag2.metadata import parse_qos

    return parse_qos(value)


def qos_dict(qos) -> dict:
    """A rosbags ``Qos`` as plain JSON-able values (enum members by lower-case name)."""
    out = {}
    for name, value in qos._asdict().items():
        if name in QOS_TIMES:
            out[name] = {"sec": int(value.sec), "nsec": int(value.nsec)}
        elif hasattr(value, "name"):
            out[name] = value.name.lower()
        else:
            out[name] = value
    return out


def qos_text(profiles: list[dict]) -> str:
    """One line per topic: ``reliable, transient_local, keep_last 1`` (profiles joined by
    `` / `` when publishers differ)."""
    parts = []
    for q in profiles:
        history = q.get("history", "?")
        if history == "keep_last":
            history += f" {q.get('depth', '?')}"
        parts.append(f"{q.get('reliability', '?')}, {q.get('durability', '?')}, {history}")
    return " / ".join(dict.fromkeys(parts))
