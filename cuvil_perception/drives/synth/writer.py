"""Write a seeded synthetic drive in KITTI raw layout (see docs/drive-format.md).

Every random draw comes from a generator seeded with (seed, purpose[, frame]), so the same seed
gives the same bytes in every file, and frame k does not depend on how many frames are written.
Identical bytes are guaranteed on one machine and numpy/OpenCV build; other CPUs may differ in
the last bits of trigonometric functions.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ..calib import write_calibration
from ..labels import CLASSES, LABELS_DIR, write_labels
from ..points import write_points
from ..timestamps import write_timestamps
from .lidar_sim import scan
from .camera_image import Camera, render
from .scene import EGO_SPEED, Scene, make_scene
from .sensor import kitti_calibration, other_cameras

START_NS = calendar.timegm((2026, 1, 1, 12, 0, 0, 0, 0, 0)) * 1_000_000_000
PERIOD_NS = 100_000_000  # 10 Hz
CAMERA_DELAY_NS = 4_000_000  # the camera fires ~4 ms after the scan's reference time
PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 9]


@dataclass
class DriveSummary:
    """What ``make_drive`` wrote: frame count, points per scan, total bytes, seconds taken."""

    path: Path
    frames: int
    points: list[int] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0


def _stamps(seed: int, index: int) -> tuple[int, int]:
    """(scan ns, image ns) of frame ``index``: 10 Hz with sub-millisecond jitter."""
    rng = np.random.default_rng([seed, 2, index])
    scan_ns = START_NS + index * PERIOD_NS + int(rng.integers(-300_000, 300_001))
    return scan_ns, scan_ns + CAMERA_DELAY_NS + int(rng.integers(-500_000, 500_001))


def _objects(scene: Scene, boxes: np.ndarray, image_labels, owners: np.ndarray) -> list[dict]:
    counts = np.bincount(owners[owners >= 0], minlength=len(scene.actors))
    objects = []
    for index, actor in enumerate(scene.actors):
        label = image_labels[index]
        objects.append({"track_id": actor.track_id, "class": CLASSES[actor.cls],
                        "class_id": actor.cls, "box3d": boxes[index].tolist(),
                        "box2d": None if label.box2d is None else list(label.box2d),
                        "truncated": label.truncated, "occluded": label.occluded,
                        "num_lidar_points": int(counts[index])})
    return objects


def _make_dirs(out: Path) -> tuple[Path, Path, Path]:
    image_dir = out / "image_02" / "data"
    velo_dir = out / "velodyne_points" / "data"
    for folder in (image_dir, velo_dir, out / LABELS_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    return image_dir, velo_dir, out / LABELS_DIR


def make_drive(out: Path, frames: int, seed: int, progress=None) -> DriveSummary:
    """Write ``frames`` frames of a synthetic drive seeded by ``seed`` into folder ``out``.

    ``out`` is created if needed; files of the same names are overwritten (callers decide
    whether a non-empty folder may be used). ``progress(done, frames)``, when given, is called
    after each frame. Returns a DriveSummary.
    """
    if frames < 1:
        raise ValueError("frames must be at least 1")
    began = time.perf_counter()
    out = Path(out)
    image_dir, velo_dir, label_dir = _make_dirs(out)
    calib = kitti_calibration()
    write_calibration(out, calib, other_cameras(), calib_time="01-Jan-2026 12:00:00")
    scene = make_scene(np.random.default_rng([seed, 0]))
    cam = Camera(calib)
    summary = DriveSummary(out, frames)
    scan_stamps, image_stamps = [], []
    for index in range(frames):
        scan_ns, image_ns = _stamps(seed, index)
        scan_stamps.append(scan_ns)
        image_stamps.append(image_ns)
        t_scan = (scan_ns - START_NS) / 1e9
        t_image = (image_ns - START_NS) / 1e9
        points, owners = scan(scene, t_scan, EGO_SPEED * t_scan,
                              np.random.default_rng([seed, 1, index]))
        image, image_labels = render(cam, scene, t_image, EGO_SPEED * t_image)
        write_points(velo_dir / f"{index:010d}.bin", points)
        ok, png = cv2.imencode(".png", image, PNG_PARAMS)
        if not ok:
            raise RuntimeError("OpenCV failed to encode a PNG")
        (image_dir / f"{index:010d}.png").write_bytes(png.tobytes())
        write_labels(label_dir / f"{index:010d}.json", index, scan_ns, image_ns,
                     _objects(scene, scene.boxes_at(t_scan), image_labels, owners))
        summary.points.append(int(points.shape[0]))
        if progress is not None:
            progress(index + 1, frames)
    velo = out / "velodyne_points"
    write_timestamps(velo / "timestamps.txt", scan_stamps)
    write_timestamps(velo / "timestamps_start.txt", [ns - PERIOD_NS // 2 for ns in scan_stamps])
    write_timestamps(velo / "timestamps_end.txt", [ns + PERIOD_NS // 2 for ns in scan_stamps])
    write_timestamps(out / "image_02" / "timestamps.txt", image_stamps)
    summary.bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    summary.seconds = time.perf_counter() - began
    return summary
