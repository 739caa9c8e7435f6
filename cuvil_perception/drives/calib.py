"""KITTI raw calibration: ``calib_cam_to_cam.txt`` and ``calib_velo_to_cam.txt``.

Both files are ``key: v1 v2 ...`` lines. We need, for the left colour camera (image_02):

- ``P_rect_02`` [3, 4]: projection of rectified camera-0 coordinates to image_02 pixels;
- ``R_rect_00`` [3, 3]: rectifying rotation of camera 0;
- ``S_rect_02`` (width, height) of the rectified image, in pixels (optional);
- ``R`` [3, 3] and ``T`` [3] of ``calib_velo_to_cam.txt``: velodyne -> camera 0 (metres).

A LiDAR point ``X`` (velodyne frame: x forward, y left, z up, metres) lands on image_02 at
``P2 @ R0_rect @ Tr_velo_to_cam @ [X, 1]`` (homogeneous; R0_rect padded to 4x4).

Real KITTI raw drives keep the calibration in the date folder one level above the drive folder,
so each file is looked up in the drive folder first, then in its parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DriveError

ROTATIONS = ("R_rect_00", "R")  # entries that must be rotations
ROTATION_TOLERANCE = 1e-3  # KITTI's are orthonormal to ~1e-6; 1e-3 leaves room for rounding
MAX_IMAGE_SIDE = 65535  # pixels; S_rect_02 beyond it is not a camera
CAM_TO_CAM = "calib_cam_to_cam.txt"
VELO_TO_CAM = "calib_velo_to_cam.txt"


@dataclass(frozen=True)
class Calibration:
    """The matrices the replay source emits (float64, metres and pixels).

    ``image_size`` is (width, height) from ``S_rect_02``, or None when the file lacks it.
    """

    P2: np.ndarray  # [3, 4]
    R0_rect: np.ndarray  # [3, 3]
    Tr_velo_to_cam: np.ndarray  # [3, 4]
    image_size: tuple[int, int] | None = None

    def velo_to_image(self) -> np.ndarray:
        """[3, 4] matrix taking homogeneous velodyne points to homogeneous image_02 pixels."""
        r0 = np.eye(4)
        r0[:3, :3] = self.R0_rect
        tr = np.eye(4)
        tr[:3, :] = self.Tr_velo_to_cam
        return self.P2 @ r0 @ tr


def find_calib_file(drive: Path, name: str) -> Path:
    """``drive/name`` if present, else ``drive/../name``; DriveError when neither exists."""
    for folder in (drive, drive.parent):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    raise DriveError(f"{drive / name}: missing calibration file (also looked in "
                     f"{drive.parent / name})")


def parse_calib_file(path: Path) -> dict[str, tuple[int, list[float] | None]]:
    """``key -> (line number, floats)``; a value that is not all numbers maps to None.

    Non-numeric values (``calib_time: 09-Jan-2012 13:57:47``) are kept as None so that they can
    be ignored unless a caller needs that key.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DriveError(f"{path}: cannot read calibration ({exc})") from None
    entries: dict[str, tuple[int, list[float] | None]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, rest = line.partition(":")
        if not sep:
            raise DriveError(f"{path}:{number}: expected 'key: values', got {line.strip()!r}")
        try:
            values: list[float] | None = [float(v) for v in rest.split()]
        except ValueError:
            values = None
        entries[key.strip()] = (number, values)
    return entries


def _matrix(entries: dict, path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray:
    if key not in entries:
        raise DriveError(f"{path}: missing calibration entry '{key}'")
    number, values = entries[key]
    size = int(np.prod(shape))
    if values is None or len(values) != size:
        got = "non-numeric values" if values is None else f"{len(values)} numbers"
        raise DriveError(f"{path}:{number}: '{key}' needs {size} numbers, got {got}")
    matrix = np.array(values, dtype=np.float64).reshape(shape)
    if not np.isfinite(matrix).all():
        raise DriveError(f"{path}:{number}: '{key}' has a NaN or infinite value")
    if key in ROTATIONS and not _is_rotation(matrix):
        raise DriveError(f"{path}:{number}: '{key}' is not a rotation matrix (R R^T != I or "
                         f"det != 1, tolerance {ROTATION_TOLERANCE:g})")
    return matrix


def _is_rotation(matrix: np.ndarray) -> bool:
    return bool(np.allclose(matrix @ matrix.T, np.eye(3), atol=ROTATION_TOLERANCE)
                and abs(np.linalg.det(matrix) - 1.0) <= ROTATION_TOLERANCE)


def load_calibration(drive: Path) -> Calibration:
    """Read both calibration files of a drive (drive folder, then its parent)."""
    cam_path = find_calib_file(drive, CAM_TO_CAM)
    velo_path = find_calib_file(drive, VELO_TO_CAM)
    cam = parse_calib_file(cam_path)
    velo = parse_calib_file(velo_path)
    p2 = _matrix(cam, cam_path, "P_rect_02", (3, 4))
    r0 = _matrix(cam, cam_path, "R_rect_00", (3, 3))
    size = None
    if "S_rect_02" in cam:
        w, h = _matrix(cam, cam_path, "S_rect_02", (2,))
        size = (int(round(w)), int(round(h)))
        if not all(1 <= side <= MAX_IMAGE_SIDE for side in size):
            raise DriveError(f"{cam_path}:{cam['S_rect_02'][0]}: 'S_rect_02' image size "
                             f"{w:g} x {h:g} must be 1..{MAX_IMAGE_SIDE} pixels per side")
    rot = _matrix(velo, velo_path, "R", (3, 3))
    trans = _matrix(velo, velo_path, "T", (3,))
    tr = np.concatenate([rot, trans[:, None]], axis=1)
    return Calibration(P2=p2, R0_rect=r0, Tr_velo_to_cam=tr, image_size=size)


def image_size_hint(drive: Path) -> tuple[int, int] | None:
    """(width, height) from ``S_rect_02`` without raising; None when it cannot be read."""
    try:
        cam_path = find_calib_file(drive, CAM_TO_CAM)
        number_values = parse_calib_file(cam_path).get("S_rect_02")
    except DriveError:
        return None
    if number_values is None or number_values[1] is None or len(number_values[1]) != 2:
        return None
    w, h = number_values[1]
    if not all(np.isfinite(side) and 1 <= side <= MAX_IMAGE_SIDE for side in (w, h)):
        return None
    return int(round(w)), int(round(h))


def format_number(value: float) -> str:
    """KITTI-style scientific notation with as many digits as needed to read back exactly."""
    return np.format_float_scientific(float(value), unique=True, exp_digits=2, min_digits=6)


def _line(key: str, values) -> str:
    return f"{key}: " + " ".join(format_number(v) for v in np.ravel(values)) + "\n"


def write_calibration(folder: Path, calib: Calibration, cameras: dict[str, dict] | None = None,
                      calib_time: str = "01-Jan-2026 00:00:00") -> None:
    """Write ``calib_cam_to_cam.txt`` and ``calib_velo_to_cam.txt`` in KITTI raw format.

    ``cameras`` maps a camera id (``"00"`` .. ``"03"``) to extra entries (``S``, ``K``, ``D``,
    ``R``, ``T``, ``S_rect``, ``R_rect``, ``P_rect``) written as ``KEY_id``; the entries this
    package reads (P_rect_02, R_rect_00, S_rect_02) are always taken from ``calib``.
    Numbers are written so that parsing gives back the same float64 values.
    """
    folder = Path(folder)
    cameras = {cid: dict(entries) for cid, entries in (cameras or {}).items()}
    cameras.setdefault("00", {})["R_rect"] = calib.R0_rect
    cameras.setdefault("02", {})["P_rect"] = calib.P2
    if calib.image_size is not None:
        cameras["02"]["S_rect"] = np.array(calib.image_size, dtype=np.float64)
    lines = [f"calib_time: {calib_time}\n", _line("corner_dist", [9.95e-02])]
    order = ("S", "K", "D", "R", "T", "S_rect", "R_rect", "P_rect")
    for cid in sorted(cameras):
        for key in order:
            if key in cameras[cid]:
                lines.append(_line(f"{key}_{cid}", cameras[cid][key]))
    (folder / CAM_TO_CAM).write_text("".join(lines), encoding="utf-8")
    velo = [f"calib_time: {calib_time}\n", _line("R", calib.Tr_velo_to_cam[:, :3]),
            _line("T", calib.Tr_velo_to_cam[:, 3]), _line("delta_f", [0.0, 0.0]),
            _line("delta_c", [0.0, 0.0])]
    (folder / VELO_TO_CAM).write_text("".join(velo), encoding="utf-8")
