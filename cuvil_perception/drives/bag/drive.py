"""A ROS bag or MCAP file read as a drive: the same frames a KITTI-raw folder gives.

Opening scans the bag once: the stamp of every point cloud and image (``header.stamp``, or the
bag's log time with ``stamp="log"``; stamps are read from the raw bytes, not decoded), the first
CameraInfo (P2, R0_rect, image size) and the tf tree (LiDAR-to-camera extrinsic, from the
point cloud's frame to the camera's). Scans and images are paired with ``reader.synchronise``,
the rule (and tolerance) the KITTI reader uses. ``read(k)`` then streams the bag and decodes only
the messages frame k needs; reading in order (what the replay source does) reads the bag once
more, front to back. The opening scan also decides how the cloud's intensity becomes 0..1
reflectance (`intensity.IntensityRule`, from the first scan with a finite intensity value),
once for the whole replay, and adds it to ``notes``.

A bag damaged part-way (truncated, corrupt chunk) keeps the frames whose messages lie before
the damage; ``damage`` describes where it is, and the replay source reports it after them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import DriveError
from ..calib import Calibration
from ..labels import LABEL_COLUMNS
from ..points import clamp_reflectance
from ..reader import DriveFrame, synchronise
from ..timestamps import longest_gap
from .backend import BagFile, Damage
from .image import compressed_to_bgr, image_to_bgr
from .intensity import IntensityRule, decide, needs_values
from .pointcloud import intensity_values, pointcloud2_to_points
from .tf import TfTree, camera_info_calibration
from .topics import select_topics, tf_topics

STAMP_SOURCES = ("header", "log")


@dataclass(frozen=True)
class BagStream:
    """One sensor stream of a bag: its topic, ROS type and stamps (int64 ns, bag order)."""

    name: str
    topic: str
    msgtype: str
    stamps: np.ndarray


class _Scan:
    """What the opening scan collects."""

    def __init__(self):
        self.stamps: dict[str, list[int]] = {"points": [], "image": []}
        self.camera_info = None
        self.lidar_frame: str | None = None
        self.intensity: IntensityRule | None = None  # decided by the first scan with a value
        self.last_cloud = None  # the last cloud seen while undecided (none had a value)
        self.tf = TfTree()


class BagDrive:
    """A bag opened as a drive; same interface as ``reader.Drive`` (``len``, ``read``, ``calib``,
    ``skipped``, ``image_size``, ``lidar.stamps``). ``notes`` tell which topics were chosen
    and the intensity rule (``intensity_scale`` None: by convention, see `intensity`)."""

    def __init__(self, path: Path, sync_tolerance_ms: float = 50.0,
                 topics: dict[str, str] | None = None, stamp: str = "header",
                 intensity_scale: float | None = None):
        self.path = Path(path)
        if stamp not in STAMP_SOURCES:
            raise DriveError(f"{self.path}: stamp must be 'header' or 'log', got {stamp!r}")
        self.stamp = stamp
        self.intensity_scale = None if intensity_scale is None else float(intensity_scale)
        self.bag = BagFile(self.path)
        try:
            self.topics, self.notes = select_topics(self.bag.topics, dict(topics or {}),
                                                    self.path)
        except DriveError as exc:
            if self.bag.damage is None:
                raise
            raise DriveError(f"{self.bag.damage.describe()}; before it: "
                             f"{str(exc).removeprefix(f'{self.path}: ')}") from None
        scan = self._scan()
        self.damage: Damage | None = self.bag.damage
        self.lidar = self._stream("points", scan)
        self.camera = self._stream("image", scan)
        if self.lidar.stamps.size == 0:
            raise DriveError(self._empty_reason(f"no {self.topics['points']} message"))
        self.intensity = scan.intensity or decide(scan.last_cloud, None, self.intensity_scale,
                                                  self.scan_name(0))
        self.notes.append(f"{self.path}: {self.topics['points']} intensity: "
                          f"{self.intensity.text}")
        self.calib = self._calibration(scan)
        self.image_size = self.calib.image_size
        tolerance_ns = int(round(sync_tolerance_ms * 1e6))
        self.pairs, self.skipped = synchronise(self.lidar.stamps, self.camera.stamps,
                                               tolerance_ns)
        if not self.pairs:
            raise DriveError(self._empty_reason(
                f"no point cloud has an image within {sync_tolerance_ms:g} ms "
                "(sync_tolerance_ms)"))
        self.has_labels = False
        self._last_use = {"points": {}, "image": {}}
        for frame, (scan_index, image_index) in enumerate(self.pairs):
            self._last_use["points"][scan_index] = frame
            self._last_use["image"][image_index] = frame
        self._reader: Iterator | None = None
        self._pending: dict[tuple[str, int], tuple[int, bytes]] = {}
        self._cursor = 0

    def _empty_reason(self, what: str) -> str:
        if self.damage is not None:
            return f"{self.damage.describe()}; {what} before it"
        return f"{self.path}: {what}"

    def _stream(self, role: str, scan: _Scan) -> BagStream:
        topic = self.topics[role]
        return BagStream(role, topic, self.bag.topics[topic].msgtype,
                         np.array(scan.stamps[role], dtype=np.int64))

    def _scan(self) -> _Scan:
        scan = _Scan()
        role_of = {self.topics["points"]: "points", self.topics["image"]: "image"}
        info_topic, tf_names = self.topics["camera_info"], set(tf_topics(self.bag.topics))
        for topic, log_ns, raw in self.bag.messages(set(role_of) | {info_topic} | tf_names):
            role = role_of.get(topic)
            if role is not None:
                stamp = log_ns if self.stamp == "log" else self._header_stamp(raw, topic)
                scan.stamps[role].append(stamp)
                if role == "points" and scan.intensity is None:
                    self._first_cloud(scan, self._decode(topic, raw))
            elif topic == info_topic:
                if scan.camera_info is None:
                    scan.camera_info = self._decode(topic, raw)
            else:
                scan.tf.add(self._decode(topic, raw), f"{self.path}: {topic}")
        return scan

    def _first_cloud(self, scan: _Scan, msg) -> None:
        """Take the LiDAR frame from the first cloud, and the intensity rule from the first
        cloud that decides it (one whose rule needs values must have a finite one)."""
        ordinal = len(scan.stamps["points"]) - 1
        where = f"{self.path}: {self.topics['points']} message {ordinal}"
        if scan.lidar_frame is None:
            scan.lidar_frame = str(msg.header.frame_id)
        scan.last_cloud = msg
        values = None
        if needs_values(msg, self.intensity_scale):
            values = intensity_values(msg, where)
            if not np.isfinite(values).any():
                return
        first = ("the first scan" if ordinal == 0 else
                 f"message {ordinal}, the first scan with a finite intensity")
        scan.intensity = decide(msg, values, self.intensity_scale, where, first)

    def _header_stamp(self, raw: bytes, topic: str) -> int:
        try:
            return self.bag.header_stamp(raw)
        except (IndexError, struct.error) as exc:
            raise DriveError(f"{self.path}: {topic}: message too short for a header "
                             f"({exc})") from None

    def _decode(self, topic: str, raw: bytes):
        return self.bag.deserialize(raw, self.bag.topics[topic].msgtype)

    def _calibration(self, scan: _Scan) -> Calibration:
        info_topic = self.topics["camera_info"]
        if scan.camera_info is None:
            raise DriveError(self._empty_reason(f"no {info_topic} message"))
        where = f"{self.path}: {info_topic}"
        p2, r0, size = camera_info_calibration(scan.camera_info, where)
        camera_frame = str(scan.camera_info.header.frame_id)
        tr = scan.tf.lookup(camera_frame, scan.lidar_frame or "", f"{self.path}")
        if size[0] <= 0 or size[1] <= 0:
            size = None
        return Calibration(P2=p2, R0_rect=r0, Tr_velo_to_cam=np.ascontiguousarray(tr),
                           image_size=size)

    def __len__(self) -> int:
        return len(self.pairs)

    def longest_gap(self) -> str | None:
        """The longest pause between consecutive frames (`timestamps.longest_gap`), described
        with its place, or None: the replay source announces it before frame 0, as for a
        KITTI drive, so a paced replay never waits through it silently."""
        found = longest_gap(np.array([self.lidar.stamps[scan] for scan, _ in self.pairs],
                                     dtype=np.int64))
        if found is None:
            return None
        worst, gap_s, median_s = found
        return (f"a {gap_s:.1f} s gap between frames {worst} and {worst + 1} "
                f"({self.topics['points']} messages #{self.pairs[worst][0] + 1} and "
                f"#{self.pairs[worst + 1][0] + 1}, {self.stamp} stamps; median frame period "
                f"{median_s * 1e3:.0f} ms)")

    def _restart(self) -> None:
        self._reader = self.bag.messages({self.topics["points"], self.topics["image"]})
        self._pending = {}
        self._ordinal = {"points": 0, "image": 0}

    def _fetch(self, role: str, ordinal: int, frame: int) -> bytes:
        """Raw bytes of message ``ordinal`` of ``role``, pulling the bag forward as needed."""
        role_of = {self.topics["points"]: "points", self.topics["image"]: "image"}
        while (role, ordinal) not in self._pending:
            item = next(self._reader, None)
            if item is None:
                reason = self.bag.damage.describe() if self.bag.damage else "ended early"
                raise DriveError(f"{self.path}: {self.topics[role]} message {ordinal} is "
                                 f"missing on the second read ({reason})")
            topic, _, raw = item
            got = role_of[topic]
            number = self._ordinal[got]
            self._ordinal[got] += 1
            if self._last_use[got].get(number, -1) >= frame:
                self._pending[(got, number)] = raw
        return self._pending[(role, ordinal)]

    def read(self, index: int) -> DriveFrame:
        """Decode synchronised frame ``index`` (0 <= index < len(self)); fastest in order."""
        if self._reader is None or index < self._cursor:
            self._restart()
        self._cursor = index + 1
        scan_index, image_index = self.pairs[index]
        points_raw = self._fetch("points", scan_index, index)
        image_raw = self._fetch("image", image_index, index)
        self._pending = {k: v for k, v in self._pending.items()
                         if self._last_use[k[0]].get(k[1], -1) > index}
        points, dropped = self._points(points_raw, scan_index)
        clamped = clamp_reflectance(points)
        image = self._image(image_raw, image_index)
        labels = np.zeros((0, len(LABEL_COLUMNS)), dtype=np.float32)
        return DriveFrame(index=index, scan_index=scan_index, image_index=image_index,
                          scan_ns=int(self.lidar.stamps[scan_index]),
                          image_ns=int(self.camera.stamps[image_index]), points=points,
                          dropped_points=dropped, image=image, labels=labels,
                          clamped_points=clamped)

    def scan_name(self, ordinal: int) -> str:
        """Where scan ``ordinal`` comes from, for messages: the bag, topic and message index."""
        return f"{self.path}: {self.lidar.topic} message {ordinal}"

    def _points(self, raw: bytes, ordinal: int) -> tuple[np.ndarray, int]:
        where = self.scan_name(ordinal)
        msg = self.bag.deserialize(raw, self.lidar.msgtype)
        return pointcloud2_to_points(msg, where, self.intensity)

    def _image(self, raw: bytes, ordinal: int) -> np.ndarray:
        where = f"{self.path}: {self.camera.topic} message {ordinal}"
        msg = self.bag.deserialize(raw, self.camera.msgtype)
        if self.camera.msgtype.endswith("CompressedImage"):
            image = compressed_to_bgr(msg, where)
        else:
            image = image_to_bgr(msg, where)
        if self.image_size is None:  # CameraInfo without width/height: the first image decides
            self.image_size = (image.shape[1], image.shape[0])
        if (image.shape[1], image.shape[0]) != self.image_size:
            raise DriveError(f"{where}: image is {image.shape[1]}x{image.shape[0]}, the camera "
                             f"info says {self.image_size[0]}x{self.image_size[1]}")
        return image

    def close(self) -> None:
        self._reader = None
        self.bag.close()


def bag_image_size(path: Path, topics: dict[str, str] | None = None) -> tuple[int, int] | None:
    """(width, height) of a bag's camera, cheaply: the first CameraInfo, else the first image
    (decoded). None when the bag cannot tell (the error surfaces when the drive is opened)."""
    try:
        with BagFile(path) as bag:
            chosen, _ = select_topics(bag.topics, dict(topics or {}), Path(path))
            for topic, _, raw in bag.messages({chosen["camera_info"]}):
                info = bag.deserialize(raw, bag.topics[topic].msgtype)
                if int(info.width) > 0 and int(info.height) > 0:
                    return int(info.width), int(info.height)
                break
            for topic, _, raw in bag.messages({chosen["image"]}):
                msgtype = bag.topics[topic].msgtype
                msg = bag.deserialize(raw, msgtype)
                image = (compressed_to_bgr(msg) if msgtype.endswith("CompressedImage")
                         else image_to_bgr(msg))
                return image.shape[1], image.shape[0]
    except DriveError:
        return None
    return None
