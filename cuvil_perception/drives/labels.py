"""Ground-truth label sidecar: ``<drive>/labels/%010d.json``, one file per LiDAR scan.

File ``labels/0000000007.json`` belongs to ``velodyne_points/data/0000000007.bin``::

    {"format": "cuvil-labels-1", "frame": 7,
     "timestamp_ns": <LiDAR scan time>, "image_timestamp_ns": <camera image time>,
     "objects": [{"track_id": 3, "class": "car", "class_id": 0,
                  "box3d": [x, y, z, dx, dy, dz, heading],
                  "box2d": [x1, y1, x2, y2] or null,
                  "truncated": 0.0, "occluded": 0, "num_lidar_points": 412}, ...]}

``box3d`` is in the velodyne frame (x forward, y left, z up, metres) at the scan time: (x, y, z)
is the box centre, (dx, dy, dz) its length, width and height, ``heading`` the yaw about +z in
radians from +x (OpenPCDet convention). ``box2d`` is the projected 3D box in the camera image at
the image time, clipped to the image, in pixels; null when the box is not in the image.
``truncated`` is 1 - clipped area / unclipped area of that box (0..1); ``occluded`` follows KITTI
(0 fully visible, 1 partly, 2 largely occluded). Classes are 0-based: car 0, pedestrian 1,
cyclist 2. The replay source turns a file into float32 [M, 12] rows, see ``LABEL_COLUMNS``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import DriveError
from .points import MAX_REACH_M

FORMAT = "cuvil-labels-1"
LABELS_DIR = "labels"
CLASSES = ("car", "pedestrian", "cyclist")
LABEL_COLUMNS = ("class_id", "x", "y", "z", "dx", "dy", "dz", "heading", "x1", "y1", "x2", "y2")
"""Columns of the replay ``labels`` output; x1..y2 are -1 when the box is not in the image."""
MAX_SIZE_M = 100.0  # a labelled object's length, width or height


def label_path(drive: Path, index: int) -> Path:
    return Path(drive) / LABELS_DIR / f"{index:010d}.json"


def read_labels(path: Path) -> np.ndarray:
    """A label file as float32 [M, 12] rows (``LABEL_COLUMNS``); DriveError naming the file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DriveError(f"{path}: missing label file (the drive has a labels/ folder)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DriveError(f"{path}: cannot read labels ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DriveError(f"{path}: not a '{FORMAT}' label file")
    rows = []
    for number, obj in enumerate(doc.get("objects", [])):
        try:
            rows.append(_row(obj))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise DriveError(f"{path}: object {number}: bad field ({exc})") from None
    return np.array(rows, dtype=np.float32).reshape(-1, len(LABEL_COLUMNS))


def _row(obj: dict) -> list[float]:
    """One object as a row; values that cannot be a real object (NaN, a size <= 0 or over
    ``MAX_SIZE_M``, a centre beyond ``MAX_REACH_M``) are refused, as in point files."""
    box3d = _finite(obj["box3d"], 7, "box3d")
    if not all(0 < size <= MAX_SIZE_M for size in box3d[3:6]):
        raise ValueError(f"box3d sizes dx, dy, dz must be in (0, {MAX_SIZE_M:g}] m, got "
                         f"{box3d[3:6]}")
    if not all(abs(v) <= MAX_REACH_M for v in box3d[:3]):
        raise ValueError(f"box3d centre {box3d[:3]} is beyond {MAX_REACH_M:g} m")
    box2d = obj.get("box2d")
    box2d = [-1.0] * 4 if box2d is None else _finite(box2d, 4, "box2d")
    class_id = obj["class_id"]
    if isinstance(class_id, bool) or not isinstance(class_id, int) or not 0 <= class_id <= 9999:
        raise ValueError(f"class_id must be an integer 0..9999, got {class_id!r}")
    return [float(class_id)] + box3d + box2d


def _finite(values, count: int, name: str) -> list[float]:
    numbers = [float(v) for v in values]
    if len(numbers) != count:
        raise ValueError(f"{name} needs {count} numbers")
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"{name} has a NaN or infinite value")
    return numbers


def write_labels(path: Path, frame: int, timestamp_ns: int, image_timestamp_ns: int,
                 objects: list[dict]) -> None:
    """Write one label file; floats rounded to 4 decimals (0.1 mm, 1e-4 px) for stable text."""
    head = json.dumps({"format": FORMAT, "frame": int(frame), "timestamp_ns": int(timestamp_ns),
                       "image_timestamp_ns": int(image_timestamp_ns)})
    rows = ",\n".join("  " + json.dumps(_rounded(obj)) for obj in objects)
    body = f'{head[:-1]},\n "objects": [\n{rows}\n ]}}\n' if objects else \
        f'{head[:-1]}, "objects": []}}\n'
    Path(path).write_text(body, encoding="utf-8")


def _rounded(value):
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_rounded(v) for v in value]
    if isinstance(value, (float, np.floating)):
        rounded = round(float(value), 4)
        return 0.0 if rounded == 0 else rounded  # no "-0.0"
    if isinstance(value, np.integer):
        return int(value)
    return value
