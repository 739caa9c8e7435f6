"""The ``mcap`` sink's plumbing: a foxglove-sdk ``Context`` with its MCAP writer (one channel
per topic, created on first use, so only wired inputs appear in the file) and/or the live
WebSocket server (``foxglove_server``: every channel the wired inputs can feed is advertised
from open(), before frame 0), and the per-frame timing messages built from the run's feed
(``rt.feed``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from .foxglove_server import LiveChannel, LiveServer

TOPICS = {  # key -> (topic suffix, foxglove.channels class name or JSON schema name)
    "boxes": ("/boxes", "SceneUpdateChannel"),
    "objects": ("/objects", "SceneUpdateChannel"),
    "detections": ("/camera/detections", "ImageAnnotationsChannel"),
    "camera_objects": ("/camera/objects", "ImageAnnotationsChannel"),
    "points": ("/points", "PointCloudChannel"),
    "calibration": ("/camera/calibration", "CameraCalibrationChannel"),
    "tf": ("/tf", "FrameTransformsChannel"),
    "latency": ("/latency", "cuvil.FrameTimings"),
    "deadlines": ("/deadlines", "cuvil.DeadlineDecisions"),
}
# key -> the sink inputs that feed it (a live channel is advertised when they are all wired)
FED_BY = {"boxes": {"boxes"}, "objects": {"objects"}, "camera_objects": {"objects"},
          "detections": {"detections"}, "image": {"image"}, "points": {"points"},
          "calibration": {"P2", "R0_rect"}, "tf": {"Tr_velo_to_cam"}}
TIMING_KEYS = ("latency", "deadlines")  # fed by the run's feed, not by an input
LATCHED = ("calibration", "tf")  # a live subscriber gets the latest at once
_NUMBER, _STRING, _INT = {"type": "number"}, {"type": "string"}, {"type": "integer"}
_TIME = {"type": "object", "properties": {"sec": _INT, "nsec": _INT}}
JSON_SCHEMAS = {
    "cuvil.FrameTimings": {
        "type": "object", "title": "cuvil.FrameTimings",
        "properties": {"frame": _INT, "timestamp": _TIME, "e2e_ms": _NUMBER,
                       "stages": {"type": "object", "additionalProperties": {
                           "type": "object", "properties": {
                               "ms": _NUMBER, "cpu_ms": _NUMBER, "outcome": _STRING,
                               "variant": _STRING, "worker": _STRING}}}}},
    "cuvil.DeadlineDecisions": {
        "type": "object", "title": "cuvil.DeadlineDecisions",
        "properties": {"frame": _INT, "timestamp": _TIME, "decisions": {
            "type": "array", "items": {"type": "object", "properties": {
                "stage": _STRING, "kind": _STRING, "action": _STRING, "elapsed_ms": _NUMBER,
                "deadline_ms": _NUMBER}}}}},
}
MAX_PORT = 65535


def parse_address(text: str) -> tuple[str, int]:
    """``"HOST:PORT"``, ``"PORT"`` or ``"HOST"`` -> (host, port); default 127.0.0.1:8765."""
    text = str(text).strip()
    if not text:
        raise ValueError("expected HOST:PORT, got an empty string")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = ("127.0.0.1", text) if text.isdigit() else (text, "8765")
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or int(port_text) > MAX_PORT:
        raise ValueError(f"port must be 0..{MAX_PORT}, got {port_text!r} in {text!r}")
    return host, int(port_text)


class Channels:
    """Foxglove channels of one sink, logging to an MCAP file and/or a WebSocket server."""

    def __init__(self, params: dict, wired: set[str], path: Path | None, live: str | None,
                 timings: bool = False):
        """``wired``: the sink's connected inputs; ``timings``: the run feeds /latency and
        /deadlines (their live channels are advertised then)."""
        import foxglove
        from foxglove.mcap import MCAPCompression, MCAPWriteOptions

        self._foxglove = foxglove
        self.context = foxglove.Context()
        self.prefix = params["topic_prefix"].rstrip("/")
        self.image_format = params["image_format"]
        self._channels: dict[str, object] = {}
        self.writer = self.server = self.server_port = None
        self.path = path
        if path is not None:
            compression = {"lz4": MCAPCompression.Lz4, "zstd": MCAPCompression.Zstd,
                           "none": None}[params["compression"]]
            options = MCAPWriteOptions(compression=compression, chunk_size=8 << 20,
                                       profile="", compression_threads=0)
            self.writer = foxglove.open_mcap(Path(path), allow_overwrite=True,
                                             context=self.context, writer_options=options)
            # first record after the header: how output_files recognises our MCAP files
            from .. import __version__

            self.writer.write_metadata("cuvil-perception", {"version": __version__})
            self.writer.flush()
        if live is not None:
            keys = [k for k, needs in FED_BY.items() if needs <= wired]
            keys += list(TIMING_KEYS) if timings else []
            host, port = parse_address(live)
            try:
                self.server = LiveServer(host, port, self._live_channels(keys), LATCHED)
            except OSError as exc:  # address in use, not an address of this machine, ...
                self.close()
                from ..errors import UsageError
                raise UsageError(f"--foxglove {live}: cannot serve there "
                                 f"({exc.strerror or exc})") from None
            self.server_port = self.server.port

    def _kind(self, key: str) -> tuple[str, str]:
        """(topic suffix, foxglove.channels class name or JSON schema name) of ``key``."""
        if key == "image":
            return "/camera/image", ("RawImageChannel" if self.image_format == "raw" else
                                     "CompressedImageChannel")
        return TOPICS[key]

    def _live_channels(self, keys: list[str]) -> dict[str, LiveChannel]:
        import foxglove.messages as messages

        out = {}
        for number, key in enumerate(keys, 1):
            suffix, kind = self._kind(key)
            if kind in JSON_SCHEMAS:
                out[key] = LiveChannel(number, self.prefix + suffix, "json", kind, "jsonschema",
                                       json.dumps(JSON_SCHEMAS[kind]))
                continue
            schema = getattr(messages, kind.removesuffix("Channel")).get_schema()
            out[key] = LiveChannel(number, self.prefix + suffix, schema.encoding, schema.name,
                                   schema.encoding, base64.b64encode(schema.data).decode())
        return out

    def _channel(self, key: str):
        channel = self._channels.get(key)
        if channel is None:
            suffix, kind = self._kind(key)
            topic = self.prefix + suffix
            if kind in JSON_SCHEMAS:
                schema = self._foxglove.Schema(name=kind, encoding="jsonschema",
                                               data=json.dumps(JSON_SCHEMAS[kind]).encode())
                channel = self._foxglove.Channel(topic, schema=schema, message_encoding="json",
                                                 context=self.context)
            else:
                import foxglove.channels as channels

                channel = getattr(channels, kind)(topic, context=self.context)
            self._channels[key] = channel
        return channel

    def log(self, key: str, message, log_ns: int) -> None:
        """``message``: a foxglove.messages object, or a dict for a JSON topic."""
        if isinstance(message, dict):
            message = json.dumps(message, separators=(",", ":")).encode()
        if self.writer is not None:
            self._channel(key).log(message, log_time=int(log_ns))
        if self.server is not None:
            payload = message if isinstance(message, bytes) else message.encode()
            self.server.publish(key, payload, int(log_ns))

    def end_frame(self, index: int) -> None:
        """Finish frame ``index``'s chunk and hand it to the OS: what a kill -9 cannot take
        back. A failed write (disk full, file-size limit) is an `OutputWriteError` naming the
        file, as for a JSONL sink, not a stage crash; the writer is dropped so that close()
        does not write after the failure."""
        if self.writer is not None:
            try:
                self.writer.flush()
            except Exception as exc:  # the SDK raises its own FoxgloveError (a RuntimeError)
                writer, self.writer = self.writer, None
                try:
                    writer.close()  # fails too; closed here, the SDK does not print it later
                except Exception:
                    pass
                from ..errors import OutputWriteError

                raise OutputWriteError(self.path, f"writing frame {index} failed ({exc}); "
                                       "the frames before it stay readable by a streaming "
                                       "MCAP reader") from None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()  # writes the index and summary
            self.writer = None
        if self.server is not None:
            self.server.close()
            self.server = None


def _time(ns: int) -> dict:
    return {"sec": int(ns) // 1_000_000_000, "nsec": int(ns) % 1_000_000_000}


class FrameTimings:
    """Per-frame stage timings and deadline decisions as JSON messages. A frame is published
    once its e2e time is recorded (every stage of it has settled), or at close."""

    def __init__(self, reader):
        self._reader = reader
        self._stages: dict[int, dict] = {}
        self._e2e: dict[int, float] = {}
        self._decisions: dict[int, list] = {}
        self._stamps: dict[int, int] = {}

    def seen(self, frame: int, stamp_ns: int) -> None:
        self._stamps[frame] = stamp_ns

    def _stamp(self, frame: int) -> int:
        known = [k for k in self._stamps if k <= frame] or list(self._stamps) or [0]
        return self._stamps.get(max(known), 0) if self._stamps else 0

    def _collect(self) -> None:
        timings, e2e, decisions = self._reader.take()
        for t in timings:
            variant = t.get("variant")  # side rows as rt.stats.timing_key names them
            key = t["stage"] + (f"@{variant}" if variant in ("reference", "background") else "")
            self._stages.setdefault(t["frame"], {})[key] = {
                "ms": round((t["end_ns"] - t["start_ns"]) / 1e6, 4),
                "cpu_ms": round(t.get("cpu_ns", 0) / 1e6, 4), "outcome": t.get("outcome", ""),
                "variant": t.get("variant", ""), "worker": t.get("worker", "")}
        for entry in e2e:
            self._e2e[entry["frame"]] = round((entry["end_ns"] - entry["start_ns"]) / 1e6, 4)
        for entry in decisions:
            self._decisions.setdefault(entry.get("frame", -1), []).append(
                {k: v for k, v in entry.items() if isinstance(v, (int, float, str))})

    def ready(self, current: int | None) -> list[tuple[str, dict, int]]:
        """(topic key, message, log time) of every frame that is complete (all, at close)."""
        self._collect()
        out = []
        for frame in sorted(self._stages):
            if current is not None and frame not in self._e2e:
                continue
            stamp = self._stamp(frame)
            out.append(("latency", {"frame": frame, "timestamp": _time(stamp),
                                    "e2e_ms": self._e2e.pop(frame, None),
                                    "stages": self._stages.pop(frame)}, stamp))
        for frame in sorted(self._decisions):
            if current is not None and frame >= current:
                continue
            stamp = self._stamp(frame)
            out.append(("deadlines", {"frame": frame, "timestamp": _time(stamp),
                                      "decisions": self._decisions.pop(frame)}, stamp))
        return out
