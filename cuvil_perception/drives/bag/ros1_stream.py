"""Sequential reading of a ROS 1 bag whose index is missing or damaged (a ``rosbag record``
killed before it closed the file leaves one; ``rosbag reindex`` would rebuild it).

Format 2.0: after ``#ROSBAG V2.0\\n``, records of ``header_len, header, data_len, data``; a
header is a list of ``len, name=value`` fields, ``op`` says the record kind. Messages live in
chunk records (``op`` 0x05, ``compression`` none / bz2 / lz4) holding connection records
(0x07: ``conn``, ``topic``; data = another header with ``type`` and ``message_definition``) and
message records (0x02: ``conn``, ``time`` = uint32 sec, uint32 nsec). The index records after
each chunk and at the end are not needed to read front to back. ``damage`` names the byte where
the first incomplete or unreadable record starts; everything before it is used.
"""

from __future__ import annotations

import bz2
import mmap
import struct
from pathlib import Path
from typing import Iterator

from ...errors import DriveError
from .records import Damage, StreamConnection, TopicInfo

MAGIC = b"#ROSBAG V2.0\n"
OP_MESSAGE, OP_CHUNK, OP_CONNECTION = 0x02, 0x05, 0x07


class _Cut(Exception):
    """The record at this position is incomplete or unreadable."""


def _header(raw: bytes) -> dict[str, bytes]:
    fields, at = {}, 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise _Cut("header field length runs past the header")
        (size,) = struct.unpack_from("<I", raw, at)
        field = raw[at + 4:at + 4 + size]
        if len(field) != size or b"=" not in field:
            raise _Cut("malformed header field")
        name, _, value = field.partition(b"=")
        fields[name.decode("ascii", "replace")] = value
        at += 4 + size
    return fields


def _records(data: bytes, start: int) -> Iterator[tuple[int, dict, bytes, int]]:
    """(start offset, header, data, end offset) of each complete record from ``start``."""
    at = start
    while at < len(data):
        if at + 4 > len(data):
            raise _Cut("record header length cut off")
        (header_len,) = struct.unpack_from("<I", data, at)
        data_at = at + 4 + header_len
        if data_at + 4 > len(data):
            raise _Cut("record header cut off")
        header = _header(data[at + 4:data_at])
        (data_len,) = struct.unpack_from("<I", data, data_at)
        end = data_at + 4 + data_len
        if end > len(data):
            raise _Cut("record data cut off")
        yield at, header, data[data_at + 4:end], end
        at = end


def _decompress(header: dict, payload: bytes) -> bytes:
    kind = header.get("compression", b"none").decode()
    if kind == "none":
        return payload
    if kind == "bz2":
        return bz2.decompress(payload)
    if kind == "lz4":
        from lz4.frame import decompress

        return decompress(payload)
    raise _Cut(f"unknown chunk compression {kind!r}")


class Ros1Stream:
    """A ROS 1 bag read front to back; ``topics`` and ``damage`` come from a first scan."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.damage = None
        self._connections: dict[int, StreamConnection] = {}
        counts: dict[int, int] = {}
        for conn_id, _, _ in self._messages_all():
            counts[conn_id] = counts.get(conn_id, 0) + 1
        self.topics: dict[str, TopicInfo] = {}
        for conn_id, conn in sorted(self._connections.items()):
            info = self.topics.setdefault(conn.topic, TopicInfo(conn.topic, conn.msgtype, 0))
            info.count += counts.get(conn_id, 0)
            info.connections.append(conn)
        self.topics = dict(sorted(self.topics.items()))

    def _connection(self, header: dict, payload: bytes) -> None:
        from rosbags.interfaces import MessageDefinition, MessageDefinitionFormat
        from rosbags.typesys.msg import normalize_msgtype

        conn_id = struct.unpack("<I", header["conn"])[0]
        fields = _header(payload)
        msgtype = normalize_msgtype(fields["type"].decode())
        definition = MessageDefinition(MessageDefinitionFormat.MSG,
                                       fields.get("message_definition", b"").decode())
        self._connections.setdefault(conn_id, StreamConnection(
            header["topic"].decode(), msgtype, definition))

    def _messages_all(self) -> Iterator[tuple[int, int, bytes]]:
        """(connection id, time ns, raw) of every complete message; sets ``damage``."""
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from self._scan(data)

    def _scan(self, data) -> Iterator[tuple[int, int, bytes]]:
        if data[:len(MAGIC)] != MAGIC:
            raise DriveError(f"{self.path}: not a ROS 1 bag (no '#ROSBAG V2.0' line)")
        count, at = 0, len(MAGIC)
        try:
            for at, header, payload, end in _records(data, len(MAGIC)):
                op = header.get("op", b"\x00")[0]
                if op == OP_CONNECTION:
                    self._connection(header, payload)
                elif op == OP_CHUNK:
                    inner = _decompress(header, payload)
                    for _, h, body, _ in _records(inner, 0):
                        kind = h.get("op", b"\x00")[0]
                        if kind == OP_CONNECTION:
                            self._connection(h, body)
                        elif kind == OP_MESSAGE:
                            sec, nsec = struct.unpack("<II", h["time"])
                            count += 1
                            yield struct.unpack("<I", h["conn"])[0], sec * 10**9 + nsec, body
                at = end
        except (_Cut, KeyError, struct.error, OSError, ValueError, RuntimeError) as exc:
            reason = str(exc) if isinstance(exc, _Cut) else f"{type(exc).__name__}: {exc}"
            self.damage = Damage(self.path, at, count, reason)

    def messages(self, names: set[str]) -> Iterator[tuple[str, int, bytes]]:
        """Raw messages of the named topics in file order."""
        for conn_id, time_ns, raw in self._messages_all():
            conn = self._connections.get(conn_id)
            if conn is not None and conn.topic in names:
                yield conn.topic, time_ns, raw

    def close(self) -> None:
        self._connections = {}
