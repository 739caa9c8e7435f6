"""Write a KITTI-raw drive as a ROS bag with standard message types (through ``rosbags``).

Formats: ``mcap`` (one ROS 2 MCAP file, what Foxglove opens), ``sqlite3`` (one ROS 2 ``.db3``),
``ros1`` (a ROS 1 ``.bag``), ``rosbag2-mcap`` / ``rosbag2-sqlite3`` (a rosbag2 folder with
``metadata.yaml``). Every scan and every image is written at its own time (header stamp = log
time = the drive's timestamps.txt), each image with a CameraInfo:

==========================  ==================================  ===========================
topic                       type                                holds
==========================  ==================================  ===========================
``/velodyne_points``        sensor_msgs/PointCloud2             x y z intensity (float32),
                                                                frame ``velo_link``
``/camera/image_raw``       sensor_msgs/Image (bgr8 or rgb8)    image_02, frame ``camera_00``
(``.../compressed``)        sensor_msgs/CompressedImage         (png or jpeg encodings)
``/camera/camera_info``     sensor_msgs/CameraInfo              P = P_rect_02, R = R_rect_00
``/tf_static``              tf2_msgs/TFMessage                  camera_00 <- velo_link
==========================  ==================================  ===========================

``camera_00`` is camera 0's frame, the one KITTI's P2 and R0_rect refer to. The TF carries the
extrinsic's rotation as a quaternion (see ``tf.rigid_extrinsic``). Point rows are written as
they are in the ``.bin`` (NaN rows included), so the bag reader drops the same rows.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import DriveError, UsageError
from ...temp_files import sweep_stale, temp_path
from ..reader import Drive
from .image import bgr_to_compressed, bgr_to_image
from .pointcloud import points_to_pointcloud2
from .tf import matrix_to_quaternion

FORMATS = ("mcap", "sqlite3", "ros1", "rosbag2-mcap", "rosbag2-sqlite3")
IMAGE_ENCODINGS = ("bgr8", "rgb8", "png", "jpeg")
LIDAR_FRAME = "velo_link"
CAMERA_FRAME = "camera_00"
TOPICS = {"points": "/velodyne_points", "image": "/camera/image_raw",
          "camera_info": "/camera/camera_info", "tf_static": "/tf_static"}


@dataclass
class BagSummary:
    """What a conversion wrote: path, messages, bytes on disk, wall seconds."""

    path: Path
    messages: int
    bytes: int
    seconds: float


def format_for(path: Path) -> str | None:
    """The format a file name asks for (``.mcap``, ``.db3``, ``.bag``), else None."""
    return {".mcap": "mcap", ".db3": "sqlite3", ".bag": "ros1"}.get(Path(path).suffix.lower())


class _Msgs:
    """Builds the messages of one typestore (ROS 1 and ROS 2 differ in Header and CameraInfo)."""

    def __init__(self, ros1: bool):
        from rosbags.typesys import Stores, get_typestore

        self.store = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_HUMBLE)
        if "tf2_msgs/msg/TFMessage" not in self.store.fielddefs:  # ROS 1's store lacks it
            from rosbags.typesys import get_types_from_msg

            self.store.register(get_types_from_msg(
                "geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"))
        self.types = self.store.types
        self.ros1 = ros1

    def header(self, stamp_ns: int, frame: str, seq: int = 0):
        sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
        stamp = self.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)
        header = self.types["std_msgs/msg/Header"]
        if self.ros1:
            return header(seq=seq, stamp=stamp, frame_id=frame)
        return header(stamp=stamp, frame_id=frame)

    def camera_info(self, header, calib, size: tuple[int, int]):
        names = ("D", "K", "R", "P") if self.ros1 else ("d", "k", "r", "p")
        values = (np.zeros(5), calib.P2[:, :3].reshape(-1).copy(),
                  calib.R0_rect.reshape(-1).copy(), calib.P2.reshape(-1).copy())
        roi = self.types["sensor_msgs/msg/RegionOfInterest"](
            x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
        return self.types["sensor_msgs/msg/CameraInfo"](
            header=header, height=size[1], width=size[0], distortion_model="plumb_bob",
            binning_x=0, binning_y=0, roi=roi, **dict(zip(names, values)))

    def tf_static(self, header, tr: np.ndarray):
        t = self.types
        x, y, z, w = matrix_to_quaternion(tr[:, :3])
        transform = t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=float(tr[0, 3]), y=float(tr[1, 3]),
                                                       z=float(tr[2, 3])),
            rotation=t["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w))
        stamped = t["geometry_msgs/msg/TransformStamped"](
            header=header, child_frame_id=LIDAR_FRAME, transform=transform)
        return t["tf2_msgs/msg/TFMessage"](transforms=[stamped])

    def serialize(self, msg, msgtype: str) -> bytes:
        if self.ros1:
            return bytes(self.store.serialize_ros1(msg, msgtype))
        return bytes(self.store.serialize_cdr(msg, msgtype))


def _raw_points(path: Path) -> np.ndarray:
    """A .bin's rows as they are (NaN rows kept), float32 [N, 4]."""
    raw = Path(path).read_bytes()
    if len(raw) % 16:
        raise DriveError(f"{path}: size {len(raw)} bytes is not a multiple of 16 "
                         "(N x 4 float32 expected)")
    return np.frombuffer(raw, dtype="<f4").reshape(-1, 4)


def _events(drive: Drive) -> list[tuple[int, int, str, int]]:
    """(time ns, order, stream, index) of every scan and image, in time order."""
    events = [(int(t), 1, "points", i) for i, t in enumerate(drive.lidar.stamps)]
    events += [(int(t), 2, "image", i) for i, t in enumerate(drive.camera.stamps)]
    return sorted(events)


def _bare_stem(out: Path, fmt: str) -> str:
    """The name to give the rosbags writer for a single-file bag at ``out``: the writer names
    its storage file ``NAME.mcap`` / ``NAME.db3`` and records that name in the metadata it
    embeds in the file (rosbag2's ``relative_file_paths`` and ``files``), so NAME is ``out``'s
    name without that extension, and ``out`` must end in it for the names to agree."""
    ext = ".mcap" if fmt == "mcap" else ".db3"
    if out.suffix != ext:
        raise UsageError(f"{out}: a {fmt} bag's name must end in {ext} (the rosbag2 metadata "
                         f"inside the file names the file); use --format rosbag2-{fmt} for a "
                         "folder")
    return out.name[: -len(ext)]


class _Out:
    """Where the rosbags writer writes, and how the result is moved into place: every format
    is written inside a staging folder beside ``out`` (``temp_files.temp_path``) and renamed
    onto ``out`` when complete, so a killed convert leaves no half bag at ``out`` (and a later
    write into that folder removes the staging folder, see ``temp_files.sweep_stale``)."""

    def __init__(self, out: Path, fmt: str):
        self.out, self.fmt = out, fmt
        self.bare = fmt in ("mcap", "sqlite3")
        stem = _bare_stem(out, fmt) if self.bare else out.name  # checked before any write
        out.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(out.parent)
        self.staging = temp_path(out)
        self.staging.mkdir()
        # the rosbags writer wants a path that is free, and names its storage file after it
        self.target = self.staging / stem

    def writer(self):
        if self.fmt == "ros1":
            from rosbags.rosbag1 import Writer
            return Writer(self.target)
        from rosbags.rosbag2 import StoragePlugin, Writer
        plugin = StoragePlugin.MCAP if self.fmt.endswith("mcap") else StoragePlugin.SQLITE3
        return Writer(self.target, version=9, storage_plugin=plugin)

    def finish(self) -> None:
        written = self.target
        if self.bare:  # the rosbag2 folder holds one storage file: that file is the output
            (written,) = [p for p in self.target.iterdir() if p.name != "metadata.yaml"]
        if self.out.exists():  # made by someone else while we wrote: never write over it
            raise UsageError(f"{self.out}: appeared while converting; left as it is")
        os.replace(written, self.out)
        shutil.rmtree(self.staging)

    def abandon(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def write_bag(drive_path: Path, out: Path, fmt: str | None = None,
              image_encoding: str = "bgr8") -> BagSummary:
    """Convert the KITTI-raw drive at ``drive_path`` into a bag at ``out`` (must not exist)."""
    out = Path(out)
    fmt = fmt or format_for(out) or "rosbag2-mcap"
    if fmt not in FORMATS:
        raise UsageError(f"{out}: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if image_encoding not in IMAGE_ENCODINGS:
        raise UsageError(f"image encoding must be one of {', '.join(IMAGE_ENCODINGS)}, "
                         f"got {image_encoding!r}")
    if os.path.lexists(out):  # lexists: a dangling symlink or a loop is the user's too
        raise UsageError(f"{out}: exists (convert never writes over a file it did not make)")
    drive = Drive(Path(drive_path))
    start = time.perf_counter()
    target = _Out(out, fmt)
    try:
        count = _write_all(drive, target, image_encoding)
        target.finish()
    except BaseException:
        target.abandon()
        raise
    size = sum(p.stat().st_size for p in out.rglob("*")) if out.is_dir() else out.stat().st_size
    return BagSummary(out, count, size, time.perf_counter() - start)


def _camera_messages(msgs: _Msgs, drive: Drive, index: int, stamp: int, encoding: str,
                     size: tuple[int, int]):
    """(image message, CameraInfo, image size) of camera frame ``index``."""
    from ..images import read_image

    header = msgs.header(stamp, CAMERA_FRAME, index)
    image = read_image(drive.camera.files[index])
    size = size if size != (0, 0) else (image.shape[1], image.shape[0])
    message = (bgr_to_compressed(msgs.types, image, header, encoding)
               if encoding in ("png", "jpeg") else bgr_to_image(msgs.types, image, header,
                                                                encoding))
    return message, msgs.camera_info(header, drive.calib, size), size


def _write_all(drive: Drive, target: _Out, image_encoding: str) -> int:
    msgs = _Msgs(ros1=target.fmt == "ros1")
    compressed = image_encoding in ("png", "jpeg")
    types = {"points": "sensor_msgs/msg/PointCloud2", "info": "sensor_msgs/msg/CameraInfo",
             "tf": "tf2_msgs/msg/TFMessage",
             "image": "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image"}
    topics = {"points": TOPICS["points"], "info": TOPICS["camera_info"],
              "tf": TOPICS["tf_static"],
              "image": TOPICS["image"] + ("/compressed" if compressed else "")}
    size = drive.image_size or (0, 0)
    first = min(int(drive.lidar.stamps[0]), int(drive.camera.stamps[0]))
    with target.writer() as writer:
        conns = {key: writer.add_connection(
            topics[key], types[key], typestore=msgs.store,
            **(_latched(msgs.ros1) if key == "tf" else {})) for key in topics}

        def put(key, stamp, msg):
            writer.write(conns[key], stamp, msgs.serialize(msg, types[key]))

        put("tf", first, msgs.tf_static(msgs.header(first, CAMERA_FRAME),
                                        drive.calib.Tr_velo_to_cam))
        count = 1
        for stamp, _, stream, index in _events(drive):
            if stream == "points":
                header = msgs.header(stamp, LIDAR_FRAME, index)
                put("points", stamp, points_to_pointcloud2(
                    msgs.types, _raw_points(drive.lidar.files[index]), header))
                count += 1
                continue
            image, info, size = _camera_messages(msgs, drive, index, stamp, image_encoding, size)
            put("image", stamp, image)
            put("info", stamp, info)
            count += 2
    return count


def _latched(ros1: bool) -> dict:
    """How /tf_static is published: latched (ROS 1), or the QoS tf2's static broadcaster offers
    (reliable, transient_local, keep_last 1; ROS 2), which a player needs to republish it so
    late subscribers still get it."""
    if ros1:
        return {"latching": 1}
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness,
                                    QosReliability, QosTime)

    never = QosTime(0, 0)  # 0: the RMW default (no deadline, lifespan or lease)
    return {"offered_qos_profiles": [Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE,
                                         QosDurability.TRANSIENT_LOCAL, never, never,
                                         QosLiveliness.AUTOMATIC, never, False)]}
