"""What every bag reader hands back, in one module the readers share: ``TopicInfo`` (a topic and
its connections), ``StreamConnection`` (a connection as the typestore needs it), ``Damage``
(where reading stopped) and ``read_errors`` (what the bag libraries raise on a damaged file).

``backend`` (the rosbags reader) and the two front-to-back readers (``mcap_stream``,
``ros1_stream``) all import these from here, so none of them imports another back.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple


@dataclass(frozen=True)
class Damage:
    """Where reading a bag stopped: ``offset`` in bytes (None when the format does not say),
    ``messages`` read before it, and the library's reason."""

    path: Path
    offset: int | None
    messages: int
    reason: str

    def describe(self) -> str:
        where = f"at byte {self.offset}" if self.offset is not None else \
            f"after {self.messages} message(s)"
        return f"{self.path}: damaged or truncated {where} ({self.reason})"


@dataclass
class TopicInfo:
    """A topic of the bag: ROS type (``sensor_msgs/msg/PointCloud2``), message count, and the
    library's connection objects (one per publisher)."""

    name: str
    msgtype: str
    count: int
    connections: list = field(default_factory=list)


class StreamConnection(NamedTuple):
    """What the typestore needs of a channel (same attribute names as rosbags' Connection)."""

    topic: str
    msgtype: str
    msgdef: object


def read_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a damaged or cut bag raises in rosbags, mcap, sqlite3 and struct (imported
    on call: the bag libraries load only when a bag is read)."""
    from mcap.exceptions import McapError
    from rosbags.rosbag1 import ReaderError as Reader1Error
    from rosbags.rosbag2 import ReaderError as Reader2Error
    from rosbags.serde import SerdeError

    return (Reader1Error, Reader2Error, SerdeError, McapError, sqlite3.Error, struct.error,
            EOFError, ValueError, KeyError, IndexError, OSError)
