"""Bad-input catalogue, recorded drives: broken timestamps, calibration, images and scans.

Each row damages a copy of a small synthetic drive and runs a verb on it: ``inspect --replay``
for what is read before frame 0 (index, timestamps, calibration, the first image's header) and
``run --replay`` for what is read per frame. The row asserts exit 2 with one line naming the
file (and line), no traceback, and that no file of the drive changed. Rows that are a named
skip or a warning (a long gap, out-of-range reflectance) assert the warning line instead.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives.synth import make_drive

from ._runner import assert_one_line_error, assert_unchanged, cli, cli_subprocess, snapshot

PIPELINE = ("stages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")
LIDAR = "velodyne_points"
CAMERA = "image_02"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("badinput-drive") / "drive"
    make_drive(out, 4, seed=5)
    return out


@pytest.fixture
def drive(source, tmp_path) -> Path:
    target = tmp_path / "drive"
    shutil.copytree(source, target)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    return target


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _set_line(path: Path, number: int, text: str) -> None:
    lines = _lines(path)
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


def _stamps(drive: Path, stream: str = LIDAR) -> Path:
    return drive / stream / "timestamps.txt"


def _reverse(drive: Path):
    path = _stamps(drive)
    path.write_text("\n".join(reversed(_lines(path))) + "\n")
    return path, 2, "is earlier than line 1"


def _duplicate(drive: Path):
    path = _stamps(drive, CAMERA)
    _set_line(path, 3, _lines(path)[1])
    return path, 3, "repeats line 2"


def _shuffle(drive: Path):
    path = _stamps(drive)
    lines = _lines(path)
    lines[1], lines[2] = lines[2], lines[1]
    path.write_text("\n".join(lines) + "\n")
    return path, 3, "is earlier than line 2"


def _year_9999(drive: Path):
    path = _stamps(drive)
    _set_line(path, 4, "9999-12-31 23:59:59.000000000")
    return path, 4, "outside 1970-01-01 .. 2262-04-11"


def _calib_entry(drive: Path, name: str, key: str, values: str):
    path = drive / name
    lines = _lines(path)
    number = next(i for i, line in enumerate(lines, 1) if line.startswith(f"{key}:"))
    _set_line(path, number, f"{key}: {values}")
    return path, number


def _nan_projection(drive: Path):
    path, line = _calib_entry(drive, "calib_cam_to_cam.txt", "P_rect_02",
                              " ".join(["nan"] + ["1.0"] * 11))
    return path, line, "'P_rect_02' has a NaN or infinite value"


def _inf_translation(drive: Path):
    path, line = _calib_entry(drive, "calib_velo_to_cam.txt", "T", "0.1 inf 0.3")
    return path, line, "'T' has a NaN or infinite value"


def _not_a_rotation(drive: Path):
    path, line = _calib_entry(drive, "calib_velo_to_cam.txt", "R", " ".join(["2.0"] * 9))
    return path, line, "'R' is not a rotation matrix"


def _huge_image_size(drive: Path):
    path, line = _calib_entry(drive, "calib_cam_to_cam.txt", "S_rect_02", "1e12 375")
    return path, line, "image size"


def _png_header(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk
            + struct.pack(">I", zlib.crc32(chunk)))


def _giant_first_png(drive: Path):
    path = drive / CAMERA / "data" / "0000000000.png"
    path.write_bytes(_png_header(100_000, 100_000))
    return path, None, "100000 x 100000 pixels (27.9 GiB decoded)"


def _truncated_first_scan(drive: Path):
    path = drive / LIDAR / "data" / "0000000000.bin"
    path.write_bytes(path.read_bytes()[:-5])
    return path, None, "is not a multiple of 16"


def _cut_later_scan(drive: Path):  # a stat finds it: the index refuses it before frame 0
    path = drive / LIDAR / "data" / "0000000002.bin"
    path.write_bytes(path.read_bytes()[:-4])
    return path, None, "is not a multiple of 16"


def _missing_label(drive: Path):
    path = drive / "labels" / "0000000002.json"
    path.unlink()
    return path, None, "missing label file"


INDEX_ROWS = {
    "scan-0-truncated": _truncated_first_scan,
    "scan-2-truncated": _cut_later_scan,
    "label-file-missing": _missing_label,
    "timestamps-reversed": _reverse,
    "timestamps-duplicated": _duplicate,
    "timestamps-shuffled": _shuffle,
    "timestamp-year-9999": _year_9999,
    "calib-nan": _nan_projection,
    "calib-inf": _inf_translation,
    "calib-not-rotation": _not_a_rotation,
    "calib-huge-image-size": _huge_image_size,
    "png-header-100000x100000": _giant_first_png,
}


@pytest.mark.parametrize("damage", list(INDEX_ROWS.values()), ids=list(INDEX_ROWS))
@pytest.mark.parametrize("verb", ["inspect", "run"])
def test_bad_drive_index(drive, damage, verb):
    path, line, fragment = damage(drive)
    before = snapshot(drive.parent)
    where = f"{path}:{line}:" if line else f"{path}:"
    result = cli(verb, "p.yaml", "--replay", str(drive), cwd=drive.parent)
    assert_one_line_error(result, where, fragment)
    assert_unchanged(before)
    assert not (drive.parent / "out.jsonl").exists()  # refused before anything was written


def _giant_later_png(drive: Path):
    path = drive / CAMERA / "data" / "0000000002.png"
    path.write_bytes(_png_header(100_000, 100_000))
    return path, "PNG header says 100000 x 100000"


def _label(field: str, value: str, fragment: str):
    """Replace the first object's ``field`` in frame 1's label file by ``value``."""
    def damage(drive: Path):
        path = drive / "labels" / "0000000001.json"
        text = path.read_text()
        start = text.index(f'"{field}": ') + len(field) + 4
        end = text.index("]", start) + 1 if text[start] == "[" else text.index(",", start)
        path.write_text(text[:start] + value + text[end:])
        return path, f"object 0: bad field ({fragment}"
    return damage


def _cut_png(drive: Path):  # a copy cut off part-way
    path = drive / CAMERA / "data" / "0000000002.png"
    path.write_bytes(path.read_bytes()[:-300])
    return path, "not a readable image (truncated PNG: cut off at byte"


def _png_bit_rot(drive: Path):  # one byte of the image data flipped
    path = drive / CAMERA / "data" / "0000000002.png"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    return path, "not a readable image (corrupt PNG: chunk 'IDAT' at byte"


FRAME_ROWS = {"png-header-frame-2": _giant_later_png, "png-cut": _cut_png,
              "png-bit-rot": _png_bit_rot,
              "label-nan-box": _label("box3d", "[NaN, 0, 0, 4, 2, 1.5, 0]", "box3d has a NaN"),
              "label-negative-size": _label("box3d", "[10, 0, 0, -4, 2, 1.5, 0]",
                                            "box3d sizes"),
              "label-far-away": _label("box3d", "[1e9, 0, 0, 4, 2, 1.5, 0]", "box3d centre"),
              "label-class-text": _label("class_id", '"car"', "class_id must be an integer")}


@pytest.mark.parametrize("damage", list(FRAME_ROWS.values()), ids=list(FRAME_ROWS))
def test_bad_frame_file_stops_the_run_naming_it(drive, damage):
    path, fragment = damage(drive)
    before = snapshot(drive)
    result = cli("run", "p.yaml", "--replay", str(drive), cwd=drive.parent)
    assert_one_line_error(result, str(path), fragment)
    assert_unchanged(before)


def test_missing_drive_is_refused_by_inspect_too(tmp_path):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    for verb in ("inspect", "run"):
        result = cli(verb, "p.yaml", "--replay", str(tmp_path / "nope"), cwd=tmp_path)
        assert_one_line_error(result, str(tmp_path / "nope"), "no such drive folder")


def test_no_drive_names_the_stage_and_param(tmp_path):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    result = cli("inspect", "p.yaml", cwd=tmp_path)
    assert_one_line_error(result, "p.yaml:2:", "stage 'drive'", "params.path", "--replay")


@pytest.mark.parametrize("fmt", ["kitti", "mcap"])
def test_an_hour_long_gap_is_announced_before_frame_0(drive, fmt):
    """Every drive format (a KITTI folder, a bag) names a long stamp gap before frame 0, so a
    paced replay never waits through it silently."""
    path = _stamps(drive)
    lines = _lines(path)
    for number in (3, 4):  # shift frames 2 and 3 by one hour: one gap between frames 1 and 2
        hour = int(lines[number - 1][11:13]) + 1
        lines[number - 1] = f"{lines[number - 1][:11]}{hour:02d}{lines[number - 1][13:]}"
    path.write_text("\n".join(lines) + "\n")
    camera = _stamps(drive, CAMERA)
    cam_lines = _lines(camera)
    for number in (3, 4):
        hour = int(cam_lines[number - 1][11:13]) + 1
        cam_lines[number - 1] = f"{cam_lines[number - 1][:11]}{hour:02d}" \
                                f"{cam_lines[number - 1][13:]}"
    camera.write_text("\n".join(cam_lines) + "\n")
    recording, place = drive, "lines 2 and 3"
    if fmt == "mcap":
        recording, place = drive.parent / "drive.mcap", "messages #2 and #3"
        assert cli("convert", str(drive), str(recording)).code == 0
    result = cli("run", "p.yaml", "--replay", str(recording), cwd=drive.parent)
    assert result.code == 0 and not result.crash, result
    gap = [line for line in result.stderr.splitlines() if "s gap between" in line]
    assert len(gap) == 1, result.stderr
    assert "a 3600.1 s gap between frames 1 and 2" in gap[0] and place in gap[0], gap


def test_reflectance_out_of_range_is_clamped_and_named(drive):
    path = drive / LIDAR / "data" / "0000000001.bin"
    points = np.fromfile(path, "<f4").reshape(-1, 4)
    points[:5, 3] = 1e30
    points[5:7, 3] = -3.0
    points[7, 0] = 5e6  # 5000 km: not a measurement, dropped
    points.tofile(path)
    result = cli("run", "p.yaml", "--replay", str(drive), cwd=drive.parent)
    assert result.code == 0 and not result.crash, result
    warned = [line for line in result.stderr.splitlines() if "reflectance" in line]
    assert len(warned) == 1 and str(path) in warned[0] and "7 point(s)" in warned[0], \
        result.stderr


def test_absurd_points_never_give_non_finite_boxes():
    """The Python API skips the drive reader: the detector itself drops non-finite rows."""
    from cuvil_perception.graph.params import builtin_models_dir
    from cuvil_perception.ops.pillars import PointPillars

    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(0, 60, 4000), rng.uniform(-30, 30, 4000),
                              rng.uniform(-2, 0.5, 4000), np.full(4000, 1e30)]).astype(np.float32)
    model = PointPillars.from_onnx(builtin_models_dir() / "pointpillars_cuvil_demo.onnx").open()
    for detect in (model.detect, model.detect_reference):
        with np.errstate(over="ignore", invalid="ignore"):  # exp() overflows: that is the case
            boxes, scores, labels = detect(points)
        assert np.isfinite(boxes).all() and np.isfinite(scores).all()
        assert len(boxes) == len(scores) == len(labels)
        assert model.stats["nonfinite_boxes"] > 0  # the input did produce overflowing rows


def test_corrupt_png_is_one_line_even_from_the_decoder(drive):
    """libpng prints its own "libpng error: ..." on the process's stderr (fd 2, which the
    in-process runner does not see) before OpenCV gives up: the chunk check refuses the file
    first, so a real process prints one line."""
    path, fragment = _png_bit_rot(drive)
    result = cli_subprocess("run", "p.yaml", "--replay", str(drive), cwd=drive.parent)
    assert_one_line_error(result, str(path), fragment)

