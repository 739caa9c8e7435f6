"""Source ops: ``replay`` (a recorded drive in any format of ``drives.registry``: KITTI raw
layout, a ROS bag or MCAP file, picked by content; ``bag_source`` adds the bag-only params) and
``camera`` (OpenCV)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from ..drives.format import Recording
from ..drives.labels import LABEL_COLUMNS
from ..drives.recording import open_recording, recording_image_size
from ..errors import CameraError, DriveError, UsageError
from ..graph import Param, ParamProblem, PortSpec, Range, RunContext, Sample, Source, register

MAX_INTENSITY_SCALE = 1e6


@register
class Replay(Source):
    """Frames of a recorded drive, one per LiDAR scan that has a camera image within tolerance.

    ``read()`` is deterministic: frame k of a drive is always the same arrays. Scans without a
    camera image within ``sync_tolerance_ms`` are skipped; ``skipped`` counts them (and ``open``
    warns). With ``loop`` the drive repeats, timestamps shifted so they keep increasing.
    """

    name = "replay"
    tag = "io"
    roles = {"ground_truth": "labels"}
    drive_param = "path"  # --replay sets it; eval and render re-read the drive
    live_op = "camera"  # what --camera puts in place of this stage
    doc = ("Replay a drive in KITTI raw layout (camera image_02 + velodyne, synchronised), "
           "or a ROS bag / MCAP file (op bag, topics chosen automatically).")
    params = (
        Param("path", Path, None, "drive folder (KITTI raw layout) or a ROS bag / MCAP file; "
              "--replay sets it", optional=True),
        Param("intensity_scale", float, None, "null: intensity to 0..1 by convention (a "
              ".bin as stored; a bag by its field's type and values: uint8 and 0..255 floats "
              "/255, see docs/bags.md); a number multiplies the stored value instead",
              optional=True,
              range=Range(0.0, MAX_INTENSITY_SCALE, low_open=True)),
        Param("sync_tolerance_ms", float, 50.0,
              "max |camera time - scan time| for a pair, in ms", range=Range(0.0, 10_000.0),
              unit="ms"),
        Param("loop", bool, False, "start again at frame 0 after the last frame"),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self.drive: Recording | None = None
        self.skipped = 0
        self._next = 0
        self._pass = 0

    def _image_size(self, path: Path) -> tuple[int, int] | None:
        """(width, height) of the recording's images, before it is opened (static shapes)."""
        return recording_image_size(path, dict(self.p.get("topics") or {}))

    def _open_drive(self, path: Path) -> Recording:
        """The reader of the format ``path`` holds (``drives.registry``: a KITTI folder, a bag,
        ...); ``topics`` and ``stamp`` are the ``bag`` op's params."""
        return open_recording(path, self.p["sync_tolerance_ms"],
                              topics=dict(self.p.get("topics") or {}),
                              stamp=self.p.get("stamp", "header"),
                              intensity_scale=self.p.get("intensity_scale"))

    def output_ports(self) -> tuple[PortSpec, ...]:
        size = self._image_size(self.p["path"]) if self.p.get("path") is not None else None
        height, width = (size[1], size[0]) if size else (None, None)
        return (
            PortSpec("image", "uint8", (height, width, 3), "camera 2 (left colour), BGR"),
            PortSpec("points", "float32", (None, 4),
                     "LiDAR x, y, z (m, velodyne frame: x fwd, y left, z up), reflectance 0..1"),
            PortSpec("P2", "float64", (3, 4), "rectified camera-0 coords -> image_02 pixels"),
            PortSpec("R0_rect", "float64", (3, 3), "rectifying rotation of camera 0"),
            PortSpec("Tr_velo_to_cam", "float64", (3, 4), "velodyne -> camera 0 (m)"),
            PortSpec("labels", "float32", (None, len(LABEL_COLUMNS)),
                     "ground truth: " + " ".join(LABEL_COLUMNS) + " (empty without labels)"),
            PortSpec("dropped_points", "int64", (1,),
                     "rows removed from this scan (NaN/inf, or a coordinate beyond 1 km)"),
        )

    def preflight(self):
        """Open the recording's index (layout, timestamps, calibration; no frame is read)."""
        path = self.p.get("path")
        if path is None:
            raise ParamProblem("path", "no drive given: pass --replay DRIVE or set params.path")
        return self._open_drive(path)

    def open(self, ctx: RunContext) -> None:
        path = self.p.get("path")
        if path is None:  # open() without preflight (the Python API)
            raise UsageError("no drive given: pass --replay DRIVE or set params.path")
        self.drive = self.preflight()
        for note in getattr(self.drive, "notes", ()):  # topics, intensity rule: not problems
            ctx.info(note)
        self.skipped = self.drive.skipped
        self._ctx, self._clamp_warned = ctx, False
        if self.skipped:
            ctx.warning(f"replay {path}: {self.skipped} LiDAR scan(s) had no camera image "
                        f"within {self.p['sync_tolerance_ms']:g} ms and were skipped")
        gap = self.drive.longest_gap()  # every drive format: a paced wait is never silent
        if gap is not None:
            ctx.warning(f"replay {path}: {gap}; a paced replay (--rate > 0) waits through it "
                        f"(--rate 0 does not)")
        self._next = 0
        self._pass = 0

    def __len__(self) -> int:
        """Frames per pass over the drive (0 before open, and 0 when looping: unbounded)."""
        if self.drive is None or self.p["loop"]:
            return 0
        return len(self.drive)

    def read(self) -> Sample | None:
        if self.drive is None:
            raise UsageError("replay: read() before open()")
        if self._next >= len(self.drive):
            if getattr(self.drive, "damage", None) is not None:  # a cut bag: after its frames
                raise DriveError(f"{self.drive.damage.describe()}; the {len(self.drive)} "
                                 "frame(s) before it were replayed")
            if not self.p["loop"]:
                return None
            self._next, self._pass = 0, self._pass + 1
        frame = self.drive.read(self._next)
        if getattr(frame, "clamped_points", 0) and not self._clamp_warned:
            self._clamp_warned = True
            self._ctx.warning(f"{self.drive.scan_name(frame.scan_index)}: "
                              f"{frame.clamped_points} point(s) with reflectance outside "
                              f"[0, 1], clamped (later scans: not repeated)")
        self._next += 1
        shift = self._pass * self._loop_period_ns()
        calib = self.drive.calib
        outputs = {"image": frame.image, "points": frame.points, "P2": calib.P2.copy(),
                   "R0_rect": calib.R0_rect.copy(),
                   "Tr_velo_to_cam": calib.Tr_velo_to_cam.copy(), "labels": frame.labels,
                   "dropped_points": np.array([frame.dropped_points], dtype=np.int64)}
        return Sample(frame.scan_ns + shift, outputs,
                      stamps={"points": frame.scan_ns + shift, "image": frame.image_ns + shift})

    def _loop_period_ns(self) -> int:
        """Duration of one pass plus one mean frame period, so looped times keep increasing."""
        stamps = self.drive.lidar.stamps
        span = int(stamps[-1] - stamps[0])
        step = span // (len(stamps) - 1) if len(stamps) > 1 else 100_000_000
        return span + max(step, 1)

    def close(self) -> None:
        if self.drive is not None and hasattr(self.drive, "close"):
            self.drive.close()
        self.drive = None


def _is_device(device: str) -> bool:
    return device.startswith("/dev/") or device.strip().isdigit()


@register
class Camera(Source):
    """Frames from a V4L2 device (``/dev/videoN``), a device index (``"N"``) or a video file.

    Timestamps (ns): the wall clock when a live frame arrives; for files the frame's position
    in the file (CAP_PROP_POS_MSEC, ns from the file start). Always strictly increasing.
    ``live`` is True for devices. The end of a video file ends the stream (``read`` -> None);
    a live device that stops delivering raises CameraError.
    """

    name = "camera"
    tag = "io"
    doc = "Read BGR frames from a camera device or a video file with OpenCV."
    params = (
        Param("device", str, "0", "/dev/videoN, a device index N, or a video file path "
              "(relative to the working directory)"),
        Param("width", int, None, "requested frame width in pixels (devices)", optional=True,
              range=Range(1, 16384), unit="px"),
        Param("height", int, None, "requested frame height in pixels (devices)", optional=True,
              range=Range(1, 16384), unit="px"),
        Param("fps", int, None, "requested frame rate (devices)", optional=True,
              range=Range(1, 1000), unit="Hz"),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self.live = _is_device(str(self.p["device"]))
        self._cap = None
        self._pending: tuple[np.ndarray, int] | None = None
        self._last_ns = -1
        self._frames = 0

    def output_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("image", "uint8", (None, None, 3), "camera frame, BGR"),)

    def preflight(self) -> None:
        """The device node or video file exists (``inspect`` checks it too; nothing is opened)."""
        _check_device(str(self.p["device"]))

    def open(self, ctx: RunContext) -> None:
        self._cap = _open_capture(self.p["device"])
        for name, prop in (("width", cv2.CAP_PROP_FRAME_WIDTH),
                           ("height", cv2.CAP_PROP_FRAME_HEIGHT), ("fps", cv2.CAP_PROP_FPS)):
            if self.live and self.p.get(name) is not None:
                self._cap.set(prop, float(self.p[name]))
        first = self._grab()
        if first is None:
            self.close()
            raise CameraError(f"camera {self.p['device']}: delivers no frames")
        self._pending = first

    def _grab(self) -> tuple[np.ndarray, int] | None:
        ok, frame = self._cap.read()
        if not ok or frame is None or frame.size == 0:
            return None
        if self.live:
            stamp = time.time_ns()
        else:
            stamp = int(round(self._cap.get(cv2.CAP_PROP_POS_MSEC) * 1e6))
        stamp = max(stamp, self._last_ns + 1)  # a stepped clock or a 0 position stays ordered
        self._last_ns = stamp
        self._frames += 1
        return _as_bgr(frame), stamp

    def read(self) -> Sample | None:
        if self._cap is None:
            raise UsageError("camera: read() before open()")
        grabbed = self._pending if self._pending is not None else self._grab()
        self._pending = None
        if grabbed is None:
            if self.live:
                raise CameraError(f"camera {self.p['device']}: stopped delivering frames "
                                  f"after {self._frames}")
            return None
        image, stamp = grabbed
        return Sample(stamp, {"image": image}, stamps={"image": stamp})

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


def _check_device(device: str) -> None:
    """CameraError when the device node or video file is not there (nothing is opened)."""
    if device.strip().isdigit():
        node = f"/dev/video{int(device)}"
        # On Linux an index N is /dev/videoN; checking first avoids OpenCV's warning spew.
        if sys.platform.startswith("linux") and not os.path.exists(node):
            raise CameraError(f"camera {device}: no such device ({node} does not exist)")
    elif device.startswith("/dev/"):
        if not os.path.exists(device):
            raise CameraError(f"camera {device}: no such device")
    elif not Path(device).is_file():
        raise CameraError(f"camera {device}: no such video file")


def _open_capture(device: str):
    """cv2.VideoCapture for a device path, an index or a file; CameraError when impossible."""
    device = str(device)
    _check_device(device)
    cap = cv2.VideoCapture(int(device) if device.strip().isdigit() else device)
    if not cap.isOpened():
        cap.release()
        raise CameraError(f"camera {device}: cannot be opened")
    return cap


def _as_bgr(frame: np.ndarray) -> np.ndarray:
    """Any 8-bit frame OpenCV returns (grey, BGR, BGRA) as C-contiguous uint8 [H, W, 3]."""
    if frame.dtype != np.uint8:
        frame = cv2.convertScaleAbs(frame)
    if frame.ndim == 2:
        frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
    elif frame.shape[2] == 4:
        frame = cv2.cvtColor(frame, cv2.COLOR_BGRA2BGR)
    return np.ascontiguousarray(frame)
