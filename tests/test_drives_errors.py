"""Every bad drive gives a DriveError (exit code 2) with one line naming the file (and line)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives import Drive, read_points
from cuvil_perception.drives.synth import make_drive
from cuvil_perception.errors import DriveError, UsageError
from cuvil_perception.graph import Pipeline, RunContext


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("src") / "drive"
    make_drive(out, 2, seed=23)
    return out


@pytest.fixture
def drive_dir(source, tmp_path) -> Path:
    target = tmp_path / "drive"
    shutil.copytree(source, target)
    return target


def _error(path: Path, read: int | None = None) -> str:
    with pytest.raises(DriveError) as info:
        drive = Drive(path)
        if read is not None:
            drive.read(read)
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    return message


def test_bin_size_not_multiple_of_16(drive_dir):
    bad = drive_dir / "velodyne_points" / "data" / "0000000001.bin"
    bad.write_bytes(bad.read_bytes()[:-4])
    message = _error(drive_dir, read=1)
    assert str(bad) in message and "multiple of 16" in message


def test_missing_stream_folder(drive_dir):
    shutil.rmtree(drive_dir / "image_02")
    message = _error(drive_dir)
    assert str(drive_dir / "image_02") in message and "missing stream folder" in message


def test_missing_drive_folder(tmp_path):
    assert "no such drive folder" in _error(tmp_path / "nope")


def test_bad_timestamp_line_names_file_and_line(drive_dir):
    stamps = drive_dir / "image_02" / "timestamps.txt"
    lines = stamps.read_text().splitlines()
    lines[1] = "2026-01-01 12:00:00,104498490"
    stamps.write_text("\n".join(lines) + "\n")
    message = _error(drive_dir)
    assert f"{stamps}:2:" in message and "12:00:00,104498490" in message


@pytest.mark.parametrize("line", ["2026-13-01 12:00:00.0", "2026-02-30 12:00:00.0", "",
                                  "2026-01-01 12:00:00.1234567890", "yesterday"])
def test_other_bad_timestamp_lines(drive_dir, line):
    stamps = drive_dir / "velodyne_points" / "timestamps.txt"
    lines = stamps.read_text().splitlines()
    stamps.write_text("\n".join([line] + lines[1:]) + "\n")
    assert f"{stamps}:1:" in _error(drive_dir)


def test_empty_drive(drive_dir):
    for stream, suffix in (("velodyne_points", ".bin"), ("image_02", ".png")):
        for f in (drive_dir / stream / "data").glob(f"*{suffix}"):
            f.unlink()
        (drive_dir / stream / "timestamps.txt").write_text("")
    message = _error(drive_dir)
    assert "empty drive" in message and "velodyne_points" in message


def test_count_mismatch_between_files_and_timestamps(drive_dir):
    stamps = drive_dir / "velodyne_points" / "timestamps.txt"
    stamps.write_text(stamps.read_text().splitlines()[0] + "\n")
    message = _error(drive_dir)
    assert str(stamps) in message and "1 timestamps but 2 .bin files" in message


def test_gap_in_file_numbers(drive_dir):
    data = drive_dir / "image_02" / "data"
    (data / "0000000001.png").rename(data / "0000000005.png")
    assert str(data / "0000000001.png") in _error(drive_dir)


def test_unreadable_png(drive_dir):
    bad = drive_dir / "image_02" / "data" / "0000000001.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    message = _error(drive_dir, read=1)
    assert str(bad) in message and "not a readable image" in message


def test_missing_calibration_file(drive_dir):
    (drive_dir / "calib_velo_to_cam.txt").unlink()
    message = _error(drive_dir)
    assert str(drive_dir / "calib_velo_to_cam.txt") in message


def test_bad_calibration_entry_names_line(drive_dir):
    calib = drive_dir / "calib_cam_to_cam.txt"
    lines = calib.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith("P_rect_02:"))
    lines[number] = "P_rect_02: 1 2 3"
    calib.write_text("\n".join(lines) + "\n")
    message = _error(drive_dir)
    assert f"{calib}:{number + 1}:" in message and "'P_rect_02' needs 12 numbers" in message


def test_missing_label_file(drive_dir):
    missing = drive_dir / "labels" / "0000000001.json"
    missing.unlink()
    assert str(missing) in _error(drive_dir, read=1)


def test_nan_and_inf_points_are_dropped_and_counted(drive_dir, tmp_path):
    path = drive_dir / "velodyne_points" / "data" / "0000000000.bin"
    points = np.fromfile(path, dtype="<f4").reshape(-1, 4)
    corrupted = points.copy()
    corrupted[[3, 10, 11]] = [[np.nan, 0, 0, 0], [0, np.inf, 0, 0], [0, 0, 0, -np.inf]]
    corrupted.tofile(path)
    loaded, dropped = read_points(path)
    assert dropped == 3 and loaded.shape[0] == points.shape[0] - 3
    assert np.isfinite(loaded).all()
    assert np.array_equal(loaded, np.delete(points, [3, 10, 11], axis=0))
    # the replay source exposes the count with the frame
    p = Pipeline("t", base_dir=tmp_path)
    p.add("drive", "replay", path=str(drive_dir))
    op = p.validate().stage("drive").make_op()
    op.open(RunContext())
    sample = op.read()
    assert sample.outputs["dropped_points"].tolist() == [3]
    assert sample.outputs["points"].shape[0] == points.shape[0] - 3
    op.close()


def test_replay_without_a_path_is_a_usage_error():
    p = Pipeline("t")
    p.add("drive", "replay")
    op = p.validate().stage("drive").make_op()
    with pytest.raises(UsageError, match="no drive given: pass --replay DRIVE or set params.path"):
        op.open(RunContext())


def test_no_scan_within_tolerance(drive_dir):
    with pytest.raises(DriveError, match="no LiDAR scan has a camera image within 0.5 ms"):
        Drive(drive_dir, sync_tolerance_ms=0.5)  # the camera fires ~4 ms after each scan
