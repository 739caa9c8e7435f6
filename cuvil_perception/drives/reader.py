"""Read a drive in KITTI raw layout, frame by frame, synchronised on the LiDAR scans.

Layout (extra streams such as image_00, image_01, image_03 and oxts are ignored)::

    <drive>/image_02/data/0000000000.png          camera 2 (left colour), rectified
    <drive>/image_02/timestamps.txt               one line per image
    <drive>/velodyne_points/data/0000000000.bin   N x 4 float32 scans
    <drive>/velodyne_points/timestamps.txt        one line per scan (the reference stream)
    <drive>/calib_cam_to_cam.txt, calib_velo_to_cam.txt   (or in the parent folder)
    <drive>/labels/0000000000.json                optional ground truth, see labels.py

Each LiDAR scan is paired with the camera image whose timestamp is nearest, if that is within
the sync tolerance; scans without such an image are skipped and counted in ``Drive.skipped``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DriveError
from .calib import Calibration, image_size_hint, load_calibration
from .images import check_size, png_size, read_image
from .labels import LABEL_COLUMNS, LABELS_DIR, label_path, read_labels
from .points import check_scan_sizes, clamp_reflectance, read_points
from .timestamps import longest_gap, read_timestamps

IMAGE_STREAM = "image_02"
LIDAR_STREAM = "velodyne_points"


@dataclass(frozen=True)
class Stream:
    """One sensor stream: its folder, timestamps (int64 ns) and data files in frame order."""

    name: str
    folder: Path
    stamps: np.ndarray
    files: tuple[Path, ...]


@dataclass
class DriveFrame:
    """One synchronised frame.

    ``points`` float32 [N, 4] (velodyne frame; NaN/inf and out-of-reach rows removed,
    ``dropped_points`` of them; reflectance clamped into [0, 1], ``clamped_points`` of them);
    ``image`` uint8 [H, W, 3] BGR; ``labels`` float32 [M, 12] (``LABEL_COLUMNS``, empty if the
    drive has no labels); times are ns since the epoch.
    """

    index: int
    scan_index: int
    image_index: int
    scan_ns: int
    image_ns: int
    points: np.ndarray
    dropped_points: int
    image: np.ndarray
    labels: np.ndarray
    clamped_points: int = 0


def open_stream(drive: Path, name: str, suffix: str) -> Stream:
    """List a stream's files and read its timestamps; DriveError on any inconsistency."""
    folder = drive / name
    data = folder / "data"
    if not folder.is_dir():
        raise DriveError(f"{folder}: missing stream folder (expected {name}/data/ and "
                         f"{name}/timestamps.txt)")
    if not data.is_dir():
        raise DriveError(f"{data}: missing data folder of stream {name}")
    stamps_path = folder / "timestamps.txt"
    stamps = read_timestamps(stamps_path)
    names = sorted(n for n in os.listdir(data) if n.endswith(suffix))
    if len(names) != len(stamps):
        raise DriveError(f"{stamps_path}: {len(stamps)} timestamps but {len(names)} {suffix} "
                         f"files in {data}")
    for index, found in enumerate(names):
        expected = f"{index:010d}{suffix}"
        if found != expected:
            raise DriveError(f"{data / expected}: missing (files must be numbered from "
                             f"{0:010d}{suffix} without gaps; found {found})")
    return Stream(name, folder, np.array(stamps, dtype=np.int64),
                  tuple(data / n for n in names))


def synchronise(reference: np.ndarray, other: np.ndarray,
                tolerance_ns: int) -> tuple[list[tuple[int, int]], int]:
    """Pair each reference stamp with the nearest ``other`` stamp within the tolerance.

    Returns ([(reference index, other index), ...] in reference order, number of reference
    stamps left without a partner). Ties go to the earlier ``other`` stamp.
    """
    if other.size == 0:
        return [], int(reference.size)
    order = np.argsort(other, kind="stable")
    ordered = other[order]
    right = np.clip(np.searchsorted(ordered, reference), 0, ordered.size - 1)
    left = np.clip(right - 1, 0, ordered.size - 1)
    d_left = np.abs(reference - ordered[left])
    d_right = np.abs(ordered[right] - reference)
    best = np.where(d_left <= d_right, left, right)
    gap = np.minimum(d_left, d_right)
    pairs = [(i, int(order[best[i]])) for i in range(reference.size) if gap[i] <= tolerance_ns]
    return pairs, int(reference.size) - len(pairs)


def drive_image_size(drive: Path) -> tuple[int, int] | None:
    """(width, height) of the drive's images, cheaply: first PNG header, else S_rect_02."""
    drive = Path(drive)
    return png_size(drive / IMAGE_STREAM / "data" / f"{0:010d}.png") or image_size_hint(drive)


class Drive:
    """A KITTI raw drive opened for reading (lists files, reads timestamps and calibration).

    ``len(drive)`` is the number of synchronised frames; ``drive.skipped`` counts LiDAR scans
    that had no camera image within ``sync_tolerance_ms``. A ``.bin`` holds reflectance 0..1 by
    its format: ``intensity_scale`` None reads it as stored, a number multiplies it (the
    ``replay`` param, as for a bag; ``notes`` then says so).
    """

    def __init__(self, path: Path, sync_tolerance_ms: float = 50.0,
                 intensity_scale: float | None = None):
        self.path = Path(path)
        self.intensity_scale = intensity_scale
        self.notes = [] if intensity_scale is None else [
            f"{self.path}: reflectance x {intensity_scale:g} (intensity_scale)"]
        if not self.path.is_dir():
            raise DriveError(f"{self.path}: no such drive folder")
        self.lidar = open_stream(self.path, LIDAR_STREAM, ".bin")
        self.camera = open_stream(self.path, IMAGE_STREAM, ".png")
        if self.lidar.stamps.size == 0:
            raise DriveError(f"{self.lidar.folder / 'timestamps.txt'}: empty drive (no scans)")
        self.calib: Calibration = load_calibration(self.path)
        tolerance_ns = int(round(sync_tolerance_ms * 1e6))
        self.pairs, self.skipped = synchronise(self.lidar.stamps, self.camera.stamps,
                                               tolerance_ns)
        if not self.pairs:
            raise DriveError(f"{self.path}: no LiDAR scan has a camera image within "
                             f"{sync_tolerance_ms:g} ms (sync_tolerance_ms)")
        check_scan_sizes(self.lidar.files)
        self.has_labels = (self.path / LABELS_DIR).is_dir()
        if self.has_labels:  # every frame's file is there, so a run does not stop half-way
            for scan, _ in self.pairs:
                if not label_path(self.path, scan).is_file():
                    read_labels(label_path(self.path, scan))  # its DriveError names the file
        self.image_size = drive_image_size(self.path)
        check_size(self.camera.files[0] if self.camera.files else self.path, self.image_size)

    def __len__(self) -> int:
        return len(self.pairs)

    def longest_gap(self) -> str | None:
        """The longest pause between consecutive frames (`timestamps.longest_gap`), described
        with its place, or None.

        A paced replay (``--rate 1``) waits through such a gap as the recording did: the
        replay source warns with this text before frame 0 so a wait is never silent.
        """
        found = longest_gap(np.array([self.lidar.stamps[scan] for scan, _ in self.pairs],
                                     dtype=np.int64))
        if found is None:
            return None
        worst, gap_s, median_s = found
        first, second = self.pairs[worst][0], self.pairs[worst + 1][0]
        return (f"a {gap_s:.1f} s gap between frames {worst} and {worst + 1} "
                f"({self.lidar.folder / 'timestamps.txt'} lines {first + 1} and {second + 1}; "
                f"median frame period {median_s * 1e3:.0f} ms)")

    def scan_name(self, scan: int) -> str:
        """Where scan ``scan`` comes from, for messages: its ``.bin`` file."""
        return str(self.lidar.files[scan])

    def read(self, index: int) -> DriveFrame:
        """Load synchronised frame ``index`` (0 <= index < len(self))."""
        scan, image_index = self.pairs[index]
        points, dropped = read_points(self.lidar.files[scan])
        if self.intensity_scale is not None:
            points[:, 3] *= np.float32(self.intensity_scale)
        clamped = clamp_reflectance(points)
        image_file = self.camera.files[image_index]
        image = read_image(image_file)
        if self.image_size is not None and (image.shape[1], image.shape[0]) != self.image_size:
            raise DriveError(f"{image_file}: image is {image.shape[1]}x{image.shape[0]}, the "
                             f"drive's first image is {self.image_size[0]}x{self.image_size[1]}")
        if self.has_labels:
            labels = read_labels(label_path(self.path, scan))
        else:
            labels = np.zeros((0, len(LABEL_COLUMNS)), dtype=np.float32)
        return DriveFrame(index=index, scan_index=scan, image_index=image_index,
                          scan_ns=int(self.lidar.stamps[scan]),
                          image_ns=int(self.camera.stamps[image_index]), points=points,
                          dropped_points=dropped, image=image, labels=labels,
                          clamped_points=clamped)
