"""The KITTI-raw reader on the bundled drive and on drives generated here: frame counts, dtypes,
shapes, exact timestamps, calibration round-trip, real-KITTI folder layout, synchronisation."""

from __future__ import annotations

import calendar
import shutil
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives import (Calibration, Drive, format_timestamp, load_calibration,
                                     parse_calib_file, parse_timestamp, read_timestamps,
                                     synchronise, write_calibration, write_timestamps)
from cuvil_perception.drives.synth import kitti_calibration, make_drive

BUNDLED = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive"
# Lines of the real 2011_09_26 files (long lines split only to fit 100 columns).
KITTI_CAM_TO_CAM = "".join([
    "calib_time: 09-Jan-2012 13:57:47\n",
    "corner_dist: 9.950000e-02\n",
    "S_00: 1.392000e+03 5.120000e+02\n",
    "K_00: 9.842439e+02 0.000000e+00 6.900000e+02 0.000000e+00 9.808141e+02 2.331966e+02 "
    "0.000000e+00 0.000000e+00 1.000000e+00\n",
    "S_rect_00: 1.242000e+03 3.750000e+02\n",
    "R_rect_00: 9.999239e-01 9.837760e-03 -7.445048e-03 -9.869795e-03 9.999421e-01 "
    "-4.278459e-03 7.402527e-03 4.351614e-03 9.999631e-01\n",
    "P_rect_00: 7.215377e+02 0.000000e+00 6.095593e+02 0.000000e+00 0.000000e+00 7.215377e+02 "
    "1.728540e+02 0.000000e+00 0.000000e+00 0.000000e+00 1.000000e+00 0.000000e+00\n",
    "S_rect_02: 1.242000e+03 3.750000e+02\n",
    "R_rect_02: 9.998817e-01 1.511453e-02 -2.841595e-03 -1.511724e-02 9.998853e-01 "
    "-9.338510e-04 2.827154e-03 9.766976e-04 9.999955e-01\n",
    "P_rect_02: 7.215377e+02 0.000000e+00 6.095593e+02 4.485728e+01 0.000000e+00 7.215377e+02 "
    "1.728540e+02 2.163791e-01 0.000000e+00 0.000000e+00 1.000000e+00 2.745884e-03\n",
])
KITTI_VELO_TO_CAM = "".join([
    "calib_time: 15-Mar-2012 11:37:16\n",
    "R: 7.533745e-03 -9.999714e-01 -6.166020e-04 1.480249e-02 7.280733e-04 -9.998902e-01 "
    "9.998621e-01 7.523790e-03 1.480755e-02\n",
    "T: -4.069766e-03 -7.631618e-02 -2.717806e-01\n",
    "delta_f: 0.000000e+00 0.000000e+00\n",
    "delta_c: 0.000000e+00 0.000000e+00\n",
])

@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "drive"
    make_drive(out, 3, seed=11)
    return out


def _check_frames(drive: Drive, frames: int) -> None:
    assert len(drive) == frames and drive.skipped == 0
    previous = -1
    for index in range(len(drive)):
        frame = drive.read(index)
        assert frame.points.dtype == np.float32 and frame.points.ndim == 2
        assert frame.points.shape[1] == 4 and 80_000 < frame.points.shape[0] < 130_000
        assert frame.image.dtype == np.uint8 and frame.image.shape == (375, 1242, 3)
        assert frame.labels.dtype == np.float32 and frame.labels.shape[1] == 12
        assert frame.labels.shape[0] > 5
        assert frame.scan_ns > previous and abs(frame.image_ns - frame.scan_ns) < 50_000_000
        previous = frame.scan_ns


def test_bundled_drive_reads():
    if not BUNDLED.is_dir():
        pytest.skip("bundled drive datasets/sample_drive is missing")
    drive = Drive(BUNDLED)
    _check_frames(drive, len(read_timestamps(BUNDLED / "velodyne_points" / "timestamps.txt")))
    assert 1 <= len(drive) <= 20
    expected = kitti_calibration()
    assert np.array_equal(drive.calib.P2, expected.P2)
    assert np.array_equal(drive.calib.Tr_velo_to_cam, expected.Tr_velo_to_cam)
    total = sum(p.stat().st_size for p in BUNDLED.rglob("*") if p.is_file())
    assert total <= 15_000_000


def test_generated_drive_reads(generated):
    drive = Drive(generated)
    _check_frames(drive, 3)
    assert drive.image_size == (1242, 375)
    frame = drive.read(2)
    assert frame.scan_index == 2 and frame.image_index == 2
    assert frame.dropped_points == 0


def test_timestamps_parse_exactly_to_the_nanosecond(generated):
    expected = calendar.timegm((2011, 9, 26, 13, 2, 25, 0, 0, 0)) * 10**9 + 964389445
    assert parse_timestamp("2011-09-26 13:02:25.964389445") == expected
    assert parse_timestamp("2011-09-26 13:02:25.5") == expected - 964389445 + 500_000_000
    assert parse_timestamp("2011-09-26 13:02:25") == expected - 964389445
    # 19 significant digits: a float64 would round these; the int path must not
    for ns in (1767268800123456789, 1767268800999999999, 0, 1317042145000000001):
        assert parse_timestamp(format_timestamp(ns)) == ns
    # the label sidecar stores the same times as integers: both paths must agree exactly
    import json

    stamps = read_timestamps(generated / "velodyne_points" / "timestamps.txt")
    for index, ns in enumerate(stamps):
        doc = json.loads((generated / "labels" / f"{index:010d}.json").read_text())
        assert doc["timestamp_ns"] == ns


def test_timestamps_file_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    stamps = sorted(int(v) for v in rng.integers(10**18, 2 * 10**18, size=50))
    write_timestamps(tmp_path / "timestamps.txt", stamps)
    assert read_timestamps(tmp_path / "timestamps.txt") == stamps


def _rotation(rng) -> np.ndarray:
    """A random proper rotation (the loader refuses R_rect_00 / R that are not rotations)."""
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q if np.linalg.det(q) > 0 else -q


def test_calibration_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    velo = np.concatenate([_rotation(rng), rng.normal(size=(3, 1))], axis=1)
    calib = Calibration(P2=rng.normal(size=(3, 4)) * 700, R0_rect=_rotation(rng),
                        Tr_velo_to_cam=velo, image_size=(1226, 370))
    write_calibration(tmp_path, calib)
    loaded = load_calibration(tmp_path)
    assert np.array_equal(loaded.P2, calib.P2)
    assert np.array_equal(loaded.R0_rect, calib.R0_rect)
    assert np.array_equal(loaded.Tr_velo_to_cam, calib.Tr_velo_to_cam)
    assert loaded.image_size == (1226, 370)
    assert loaded.P2.dtype == np.float64 and loaded.Tr_velo_to_cam.shape == (3, 4)


def test_real_kitti_layout_calib_in_parent_and_extra_streams(generated, tmp_path):
    """KITTI raw: <date>/calib_*.txt above <date>/<date>_drive_0001_sync/, with image_00..03 and
    oxts streams beside image_02 and velodyne timestamps_start/end files."""
    date = tmp_path / "2011_09_26"
    drive_dir = date / "2011_09_26_drive_0001_sync"
    shutil.copytree(generated, drive_dir)
    for name in ("calib_cam_to_cam.txt", "calib_velo_to_cam.txt"):
        (drive_dir / name).unlink()
    (date / "calib_cam_to_cam.txt").write_text(KITTI_CAM_TO_CAM)
    (date / "calib_velo_to_cam.txt").write_text(KITTI_VELO_TO_CAM)
    (date / "calib_imu_to_velo.txt").write_text("R: 1 0 0 0 1 0 0 0 1\nT: 0 0 0\n")
    for extra in ("image_00", "image_01", "image_03", "oxts"):
        (drive_dir / extra / "data").mkdir(parents=True)
        (drive_dir / extra / "timestamps.txt").write_text("garbage that is never read\n")
    assert (drive_dir / "velodyne_points" / "timestamps_start.txt").is_file()
    drive = Drive(drive_dir)
    assert len(drive) == 3
    assert drive.calib.P2[0, 3] == 4.485728e+01 and drive.calib.R0_rect[2, 2] == 9.999631e-01
    assert drive.calib.Tr_velo_to_cam[2, 3] == -2.717806e-01
    assert drive.calib.image_size == (1242, 375)
    entries = parse_calib_file(date / "calib_cam_to_cam.txt")
    assert entries["calib_time"] == (1, None) and len(entries["K_00"][1]) == 9


def test_projection_lands_labelled_points_inside_their_2d_box(generated):
    """Calibration, points and labels agree: LiDAR points inside a labelled 3D box project
    inside that object's 2D box (the image is 4 ms later, so allow a few pixels)."""
    drive = Drive(generated)
    frame = drive.read(0)
    matrix = drive.calib.velo_to_image()
    checked = 0
    for row in frame.labels:
        if row[8] < 0 or not (5 < row[1] < 40):
            continue
        local = frame.points[:, :3] - row[1:4]
        c, s = np.cos(-row[7]), np.sin(-row[7])
        lx = c * local[:, 0] - s * local[:, 1]
        ly = s * local[:, 0] + c * local[:, 1]
        inside = (np.abs(lx) < row[4] / 2) & (np.abs(ly) < row[5] / 2) & \
            (np.abs(local[:, 2]) < row[6] / 2)
        if inside.sum() < 20:
            continue
        homo = np.c_[frame.points[inside, :3], np.ones(int(inside.sum()))] @ matrix.T
        uv = homo[:, :2] / homo[:, 2:3]
        assert (uv[:, 0] > row[8] - 3).all() and (uv[:, 0] < row[10] + 3).all()
        assert (uv[:, 1] > row[9] - 3).all() and (uv[:, 1] < row[11] + 3).all()
        checked += 1
    assert checked >= 3


def test_synchronise_nearest_within_tolerance():
    lidar = np.array([0, 100, 200, 300], dtype=np.int64) * 1_000_000
    camera = np.array([4, 160, 195, 251, 302], dtype=np.int64) * 1_000_000
    pairs, skipped = synchronise(lidar, camera, 10_000_000)
    assert pairs == [(0, 0), (2, 2), (3, 4)] and skipped == 1
    pairs, skipped = synchronise(lidar, camera[::-1].copy(), 10_000_000)  # unsorted stream
    assert pairs == [(0, 4), (2, 2), (3, 0)] and skipped == 1
    assert synchronise(lidar, np.array([], dtype=np.int64), 10)[1] == 4


def test_unmatched_scans_are_skipped_and_counted(generated, tmp_path):
    drive_dir = tmp_path / "drive"
    shutil.copytree(generated, drive_dir)
    stamps_file = drive_dir / "image_02" / "timestamps.txt"
    stamps = read_timestamps(stamps_file)
    stamps[1] += 70_000_000  # 70 ms late: between scans 1 and 2, > 50 ms from scan 1
    write_timestamps(stamps_file, stamps)
    drive = Drive(drive_dir, sync_tolerance_ms=20.0)
    assert len(drive) == 2 and drive.skipped == 1
    assert [drive.read(i).scan_index for i in range(2)] == [0, 2]
    assert len(Drive(drive_dir, sync_tolerance_ms=100.0)) == 3


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "kitti_velodyne"


def test_real_kitti_scans_replay_unchanged(tmp_path):
    """Real KITTI velodyne scans in a KITTI raw folder tree (calibration in the date folder,
    real timestamp lines) replay bit-exact, and the demo's LiDAR ops digest them."""
    if not SHARED.is_dir():
        pytest.skip("shared KITTI data not present")
    import cv2

    from cuvil_perception.ops.lidar import bev_image, crop_mask

    date = tmp_path / "2011_09_26"
    drive_dir = date / "2011_09_26_drive_0001_sync"
    date.mkdir(parents=True)
    (date / "calib_cam_to_cam.txt").write_text(KITTI_CAM_TO_CAM)
    (date / "calib_velo_to_cam.txt").write_text(KITTI_VELO_TO_CAM)
    scans = sorted(SHARED.glob("*.bin"))[:4]
    velo = drive_dir / "velodyne_points" / "data"
    cam = drive_dir / "image_02" / "data"
    velo.mkdir(parents=True)
    cam.mkdir(parents=True)
    velo_lines, cam_lines = [], []
    for index, scan in enumerate(scans):
        (velo / f"{index:010d}.bin").write_bytes(scan.read_bytes())
        cv2.imwrite(str(cam / f"{index:010d}.png"), np.zeros((375, 1242, 3), np.uint8))
        velo_lines.append(f"2011-09-26 13:02:{25 + index // 10:02d}.{index % 10}64389445\n")
        cam_lines.append(f"2011-09-26 13:02:{25 + index // 10:02d}.{index % 10}71128721\n")
    (drive_dir / "velodyne_points" / "timestamps.txt").write_text("".join(velo_lines))
    (drive_dir / "image_02" / "timestamps.txt").write_text("".join(cam_lines))
    drive = Drive(drive_dir)
    assert len(drive) == len(scans) and drive.skipped == 0
    base = calendar.timegm((2011, 9, 26, 13, 2, 25, 0, 0, 0)) * 10**9
    for index, scan in enumerate(scans):
        frame = drive.read(index)
        assert frame.scan_ns == base + index * 100_000_000 + 64389445
        assert frame.image_ns - frame.scan_ns == 6_739_276
        raw = np.fromfile(scan, dtype=np.float32).reshape(-1, 4)
        assert np.array_equal(frame.points, raw) and frame.dropped_points == 0
        assert 15_000 < raw.shape[0] < 25_000
        kept = crop_mask(raw, [0.0, 69.12], [-39.68, 39.68], [-3.0, 1.0])
        image = bev_image(raw, [0.0, 69.12], [-39.68, 39.68], [-3.0, 1.0], 0.16)
        occupied = int((image[..., 2] > 0).sum())
        assert image.shape == (432, 496, 3) and 1000 < occupied <= int(kept.sum())
