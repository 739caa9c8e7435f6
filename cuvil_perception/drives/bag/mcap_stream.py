"""Sequential reading of a ROS 2 MCAP file that has no usable summary (cut by a crash or kill).

MCAP writes its index (chunk indexes, statistics, footer) only when the recording is closed.
A file cut before that still holds every complete chunk: ``mcap``'s ``StreamReader`` reads
records front to back, and the first record that is cut short raises. Everything before it is
used; ``damage`` says where the file stops making sense (the byte where the incomplete record
starts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...errors import DriveError
from .records import Damage, StreamConnection, TopicInfo, read_errors


class McapStream:
    """An MCAP file read front to back; ``topics`` and ``damage`` come from a first scan."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.topics: dict[str, TopicInfo] = {}
        self.damage = None
        counts: dict[int, int] = {}
        schemas: dict = {}
        channels: dict = {}
        for record in self._records():
            _note_record(record, schemas, channels, counts, self.path)
        for channel_id, (topic, msgtype, msgdef) in sorted(channels.items()):
            info = self.topics.setdefault(topic, TopicInfo(topic, msgtype, 0))
            info.count += counts.get(channel_id, 0)
            info.connections.append(StreamConnection(topic, msgtype, msgdef))
        self.topics = dict(sorted(self.topics.items()))
        self._channels = channels

    def _records(self) -> Iterator:
        """Every complete record; sets ``damage`` at the first incomplete or corrupt one."""
        from mcap.stream_reader import StreamReader


        messages = 0
        with open(self.path, "rb") as f:
            good = 0
            try:
                for record in StreamReader(f, record_size_limit=1 << 31).records:
                    good = f.tell()
                    messages += type(record).__name__ == "Message"
                    yield record
            except read_errors() as exc:
                self.damage = Damage(self.path, good, messages,
                                     f"{type(exc).__name__}: {exc}".rstrip(": "))

    def messages(self, names: set[str]) -> Iterator[tuple[str, int, bytes]]:
        """Raw messages of the named topics in file order (a recorder writes in log-time
        order; out-of-order messages are rejected, as the index that would sort them is lost)."""
        wanted = {cid for cid, (topic, _, _) in self._channels.items() if topic in names}
        previous = -1
        for record in self._records():
            if type(record).__name__ != "Message" or record.channel_id not in wanted:
                continue
            if record.log_time < previous:
                raise DriveError(f"{self.path}: messages are not in log-time order and the file "
                                 "has no index to sort them (it was cut before it was closed)")
            previous = record.log_time
            yield self._channels[record.channel_id][0], int(record.log_time), record.data

    def close(self) -> None:
        self._channels = {}


def _note_record(record, schemas: dict, channels: dict, counts: dict, path: Path) -> None:
    """Collect the header profile, schemas, channels and per-channel message counts."""
    from rosbags.interfaces import MessageDefinition, MessageDefinitionFormat

    kind = type(record).__name__
    if kind == "Header" and record.profile not in ("ros2", ""):
        raise DriveError(f"{path}: MCAP profile '{record.profile}' is not a ROS 2 recording "
                         "(replay reads ROS 2 messages in CDR)")
    if kind == "Schema":
        fmt = {"ros2msg": MessageDefinitionFormat.MSG,
               "ros2idl": MessageDefinitionFormat.IDL}.get(record.encoding,
                                                          MessageDefinitionFormat.NONE)
        schemas[record.id] = (
            record.name, MessageDefinition(fmt, record.data.decode("utf-8", "replace")))
    elif kind == "Channel":
        if record.message_encoding != "cdr":
            raise DriveError(f"{path}: channel {record.topic} is encoded as "
                             f"'{record.message_encoding}', replay reads ROS 2 CDR messages")
        name, msgdef = schemas.get(record.schema_id, ("", None))
        channels[record.id] = (record.topic, name, msgdef)
    elif kind == "Message":
        counts[record.channel_id] = counts.get(record.channel_id, 0) + 1
