"""Open a ROS bag or MCAP file without ROS: the one module that talks to the bag libraries.

Why ``rosbags`` (pure Python, Apache-2.0): one library reads *and writes* all three formats a
team records in — rosbag2 with MCAP or sqlite3 storage, and ROS 1 bags — ships the standard
message definitions (so a bag recorded without embedded definitions still decodes, and the
writers need no ``.msg`` files), and (de)serialises CDR and ROS 1 messages itself.
``mcap`` + ``mcap-ros2-support`` covers only MCAP with ROS 2 messages: sqlite3 and ROS 1 would
need two more libraries, and writing ROS messages there needs hand-written definitions.
``mcap`` is still used for one thing rosbags cannot do: an MCAP file without its summary (a
recorder killed mid-write) is read sequentially with ``mcap``'s ``StreamReader`` up to its last
complete record, so the frames before the cut still replay; ``ros1_stream`` does the same for a
ROS 1 bag without its index.

The kind of file is decided by its bytes (``detect.recording_kind``), not by its extension.
Any read error becomes a ``Damage`` record (file, byte offset when known, what broke) instead
of an exception, so a caller can process the messages before it and then report it.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

from ...errors import DriveError
from .detect import BAG_KINDS, recording_kind
from .records import Damage, TopicInfo, read_errors

__all__ = ["BagFile", "Damage", "TopicInfo"]  # Damage, TopicInfo: defined in records


class BagFile:
    """A bag opened for reading. ``topics`` maps topic name -> TopicInfo; ``messages(names)``
    yields ``(topic, log_time_ns, raw_bytes)`` in log-time order; ``deserialize`` decodes.

    ``damage`` is set (and iteration ends early) when a read fails part-way; a file that cannot
    be opened at all raises DriveError naming the file.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.kind = recording_kind(self.path)
        if self.kind not in BAG_KINDS:
            raise DriveError(f"{self.path}: not a ROS bag or MCAP file (no MCAP, SQLite or "
                             "ROS 1 magic bytes, no metadata.yaml)")
        self.is_ros1 = self.kind == "ros1"
        self.damage: Damage | None = None
        self.recovered = False  # True when an MCAP without summary is read sequentially
        self._reader = None
        self._stream = None
        try:
            self._open_rosbags()
        except read_errors() as exc:
            self._stream = _front_to_back(self.path, self.kind)
            if self._stream is None:
                raise DriveError(f"{self.path}: cannot open {self.kind} bag ({exc})") from None
            self.recovered = True  # no usable index: read front to back, up to any damage
            self.damage = self._stream.damage
        self.topics = self._stream.topics if self._stream else self._rosbags_topics()
        self.typestore = self._typestore()

    def _open_rosbags(self) -> None:
        if self.is_ros1:
            from rosbags.rosbag1 import Reader
            reader = Reader(self.path)
        elif self.kind == "rosbag2":
            from rosbags.rosbag2 import Reader
            reader = Reader(self.path)
        else:
            reader = _storage_file_reader(self.path, self.kind)
        reader.open()
        self._reader = reader

    def _rosbags_topics(self) -> dict[str, TopicInfo]:
        topics: dict[str, TopicInfo] = {}
        for conn in self._reader.connections:
            info = topics.setdefault(conn.topic, TopicInfo(conn.topic, conn.msgtype, 0))
            info.count += conn.msgcount
            info.connections.append(conn)
        return dict(sorted(topics.items()))

    def _typestore(self):
        """Types from the definitions stored in the bag, over the standard ROS ones."""
        from rosbags.interfaces import MessageDefinitionFormat
        from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

        store = get_typestore(Stores.ROS1_NOETIC if self.is_ros1 else Stores.ROS2_HUMBLE)
        types: dict = {}
        for info in self.topics.values():
            for conn in info.connections:
                definition = conn.msgdef
                if definition is None:
                    continue
                try:
                    if definition.format == MessageDefinitionFormat.MSG:
                        types.update(get_types_from_msg(definition.data, conn.msgtype))
                    elif definition.format == MessageDefinitionFormat.IDL:
                        types.update(_idl_types(definition.data, get_types_from_idl))
                except Exception as exc:  # a definition the parser rejects: keep the standard one
                    if conn.msgtype not in store.fielddefs:
                        raise DriveError(f"{self.path}: topic {conn.topic}: cannot parse the "
                                         f"definition of {conn.msgtype} ({exc})") from None
        standard = {k: v for k, v in types.items() if k in store.fielddefs}
        store.register({k: v for k, v in types.items() if k not in standard})
        return store

    def messages(self, names: set[str]) -> Iterator[tuple[str, int, bytes]]:
        """Raw messages of the named topics in log-time order; stops at the first damage."""
        if self._stream is not None:
            yield from self._stream.messages(names)
            return
        connections = [c for n in names for c in self.topics[n].connections]
        count = 0
        try:
            for conn, log_ns, raw in self._reader.messages(connections=connections):
                count += 1
                yield conn.topic, int(log_ns), raw
        except read_errors() as exc:
            self.damage = Damage(self.path, None, count, f"{type(exc).__name__}: {exc}")

    def deserialize(self, raw: bytes, msgtype: str):
        """The message object (rosbags' dataclass with numpy arrays for byte fields)."""
        from rosbags.serde import SerdeError

        try:
            if self.is_ros1:
                return self.typestore.deserialize_ros1(raw, msgtype)
            return self.typestore.deserialize_cdr(raw, msgtype)
        except (SerdeError, struct.error, ValueError, IndexError) as exc:
            raise DriveError(f"{self.path}: a {msgtype} message does not decode "
                             f"({type(exc).__name__}: {exc})") from None

    def header_stamp(self, raw: bytes) -> int:
        """``header.stamp`` in ns, read from the raw bytes without decoding the message (every
        sensor message starts with a std_msgs/Header)."""
        if self.is_ros1:  # uint32 seq, uint32 sec, uint32 nsec, little-endian
            sec, nsec = struct.unpack_from("<II", raw, 4)
        else:  # 4-byte CDR encapsulation header, then int32 sec, uint32 nanosec
            order = ">" if raw[1] == 0 else "<"
            sec, nsec = struct.unpack_from(order + "iI", raw, 4)
        return int(sec) * 1_000_000_000 + int(nsec)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self) -> "BagFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _front_to_back(path: Path, kind: str):
    """A sequential reader for a bag whose index cannot be used (MCAP, ROS 1, or a rosbag2
    folder holding one MCAP file), or None when the format has no such way (sqlite3)."""
    from .mcap_stream import McapStream
    from .ros1_stream import Ros1Stream

    if kind == "rosbag2":
        files = [p for p in sorted(path.iterdir()) if recording_kind(p) == "mcap"]
        return McapStream(files[0]) if len(files) == 1 else None
    return {"mcap": McapStream, "ros1": Ros1Stream}.get(kind, lambda p: None)(path)


def _idl_types(text: str, parse) -> dict:
    """Types of an IDL definition; rosbag2 MCAP concatenates several, separated by '=' lines."""
    separator = "=" * 80 + "\n"
    if not text.startswith(separator + "IDL: "):
        return parse(text)
    types: dict = {}
    for block in text.split(separator)[1:]:
        types.update(parse(block.split("\n", 1)[1]))
    return types


def _storage_file_reader(path: Path, kind: str):
    """A rosbag2 reader over one bare storage file, whatever its name ends with (rosbags picks
    the storage by extension; we already know it from the magic bytes)."""
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.storage_mcap import McapReader
    from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader

    reader = Reader.__new__(Reader)
    reader.path = path
    reader.is_open = False
    reader.storage = (McapReader if kind == "mcap" else Sqlite3Reader)(path)
    return reader
