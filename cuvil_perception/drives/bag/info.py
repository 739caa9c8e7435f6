"""What a bag holds: what ``ros2 bag info`` shows (files, size, storage id, ROS distro, duration,
start and end, message count; per topic its type, count, serialization format and offered QoS:
``storage_info``), the rates and time span of each topic, and which topics a pipeline's
``bag``/``replay`` source would use (or why it could not choose)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DriveError
from .backend import BagFile
from .storage_info import StorageInfo, storage_info
from .topics import select_topics, tf_topics


@dataclass
class TopicSummary:
    """One topic: log times of its first and last message (ns), rate in Hz (0 for < 2)."""

    name: str
    msgtype: str
    count: int
    first_ns: int | None
    last_ns: int | None
    role: str = ""

    @property
    def rate_hz(self) -> float:
        if self.count < 2 or self.last_ns == self.first_ns:
            return 0.0
        return (self.count - 1) / ((self.last_ns - self.first_ns) / 1e9)


@dataclass
class BagInfo:
    """A bag's summary; ``selection`` is None when the source could not choose its topics
    (``selection_error`` says why)."""

    path: Path
    kind: str
    size_bytes: int
    topics: list[TopicSummary]
    selection: dict[str, str] | None
    selection_error: str = ""
    damage: str = ""
    recovered: bool = False
    notes: list[str] = field(default_factory=list)
    storage: StorageInfo | None = None

    @property
    def message_count(self) -> int:
        return sum(t.count for t in self.topics)

    @property
    def start_ns(self) -> int | None:
        times = [t.first_ns for t in self.topics if t.first_ns is not None]
        return min(times) if times else None

    @property
    def end_ns(self) -> int | None:
        times = [t.last_ns for t in self.topics if t.last_ns is not None]
        return max(times) if times else None

    @property
    def duration_ns(self) -> int:
        return 0 if self.start_ns is None else self.end_ns - self.start_ns

    def as_dict(self) -> dict:
        st = self.storage or StorageInfo(self.kind, [])
        return {"path": str(self.path), "kind": self.kind, "size_bytes": self.size_bytes,
                "storage_id": st.storage_id, "ros_distro": st.ros_distro,
                "files": [{"path": name, "bytes": size} for name, size in st.files],
                "message_count": self.message_count, "duration_ns": self.duration_ns,
                "start_ns": self.start_ns, "end_ns": self.end_ns,
                "start_utc": utc_text(self.start_ns), "end_utc": utc_text(self.end_ns),
                "recovered": self.recovered,
                "damage": self.damage or None, "selection": self.selection,
                "selection_error": self.selection_error or None,
                "topics": [{"name": t.name, "type": t.msgtype, "count": t.count,
                            "serialization_format": st.serialization.get(t.name, ""),
                            "offered_qos_profiles": st.qos.get(t.name, []),
                            "ros1_latching": t.name in st.latching,
                            "first_ns": t.first_ns, "last_ns": t.last_ns,
                            "rate_hz": round(t.rate_hz, 3), "role": t.role or None}
                           for t in self.topics]}


def utc_text(ns: int | None) -> str | None:
    """``2011-09-26 13:02:25.964389445 UTC``: a time in ns since the epoch, to the ns."""
    if ns is None:
        return None
    seconds, rest = divmod(int(ns), 1_000_000_000)
    when = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return f"{when:%Y-%m-%d %H:%M:%S}.{rest:09d} UTC"


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def bag_info(path: Path, topics: dict[str, str] | None = None) -> BagInfo:
    """Scan the bag once (every message's log time) and summarise it."""
    path = Path(path)
    with BagFile(path) as bag:
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        counts: dict[str, int] = {}
        for topic, log_ns, _ in bag.messages(set(bag.topics)):
            first.setdefault(topic, log_ns)
            last[topic] = log_ns
            counts[topic] = counts.get(topic, 0) + 1
        summaries = [TopicSummary(n, t.msgtype, counts.get(n, 0), first.get(n), last.get(n))
                     for n, t in bag.topics.items()]
        info = BagInfo(path, bag.kind, _size(path), summaries, None,
                       damage=bag.damage.describe() if bag.damage else "",
                       recovered=bag.recovered, storage=storage_info(bag))
        try:
            info.selection, info.notes = select_topics(bag.topics, dict(topics or {}), path)
        except DriveError as exc:
            info.selection_error = str(exc)
        roles = {name: role for role, name in (info.selection or {}).items()}
        roles.update({name: "tf" for name in tf_topics(bag.topics)})
        for summary in summaries:
            summary.role = roles.get(summary.name, "")
    return info
