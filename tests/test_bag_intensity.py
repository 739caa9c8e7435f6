"""Intensity by driver convention: ROS 2 bags written by rosbags in the point layouts real LiDAR
drivers publish (Velodyne, Ouster, Livox, Hesai) give the boxes of their KITTI twin, with one
``note:`` naming the rule; ``intensity_scale`` overrides it, also through ``--set``.

The twin of a float 0..255 layout is the sample drive itself (its 0.01-step reflectances
survive ``r * 255`` and an exact ``/ 255``); the twin of an 8-bit layout is the sample drive
with its reflectance quantized the way the bag stores it (``round(r * 255) / 255``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives.bag import BagDrive
from cuvil_perception.drives.bag.write import (CAMERA_FRAME, LIDAR_FRAME, TOPICS, _camera_messages,
                                               _events, _Msgs, _raw_points)
from cuvil_perception.drives.reader import Drive
from cuvil_perception.errors import DriveError
from cuvil_perception.graph import apply_cli_sources, load_pipeline
from cuvil_perception.rt import RunOptions, run_pipeline

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
CONFIG = REPO / "configs" / "lidar_pillars.yaml"


def _level(points: np.ndarray) -> np.ndarray:
    """The 8-bit level a driver stores for reflectance 0..1."""
    return np.clip(np.rint(points[:, 3].astype(np.float64) * 255), 0, 255)


def _ring(points: np.ndarray) -> np.ndarray:
    return np.arange(points.shape[0]) % 64


# name -> (point_step, [(field, numpy type, offset, values from the .bin rows)]): the layouts
# of velodyne_pointcloud (packed 22 and PCL-aligned 32), ouster-ros (48; and one whose only
# strength field is reflectivity), Livox (8-bit reflectivity, tag, line) and Hesai (float or
# uint8 intensity, double timestamp, uint16 ring)
XYZ = [("x", "f4", 0, lambda p: p[:, 0]), ("y", "f4", 4, lambda p: p[:, 1]),
       ("z", "f4", 8, lambda p: p[:, 2])]
F255 = lambda p: p[:, 3] * np.float32(255)  # noqa: E731  (float32 r * 255, as drivers do)
TIME = lambda p: np.linspace(0, 0.1, p.shape[0])  # noqa: E731
LAYOUTS = {
    "velodyne22": (22, XYZ + [("intensity", "f4", 12, F255), ("ring", "u2", 16, _ring),
                              ("time", "f4", 18, TIME)]),
    "velodyne32": (32, XYZ + [("intensity", "f4", 16, F255), ("ring", "u2", 20, _ring),
                              ("time", "f4", 24, TIME)]),
    "ouster48": (48, XYZ + [("intensity", "f4", 16, F255), ("t", "u4", 20, _ring),
                            ("reflectivity", "u2", 24, lambda p: _level(p) * 0 + 200),
                            ("ring", "u1", 26, _ring), ("ambient", "u2", 28, _ring),
                            ("range", "u4", 32, lambda p: np.hypot(p[:, 0], p[:, 1]) * 1000)]),
    "ouster_reflectivity": (48, XYZ + [("t", "u4", 20, _ring),
                                       ("reflectivity", "u2", 24, _level),
                                       ("ring", "u1", 26, _ring), ("ambient", "u2", 28, _ring)]),
    "livox": (15, XYZ + [("reflectivity", "u1", 12, _level), ("tag", "u1", 13, _ring),
                         ("line", "u1", 14, lambda p: _ring(p) % 6)]),
    "hesai_float": (32, XYZ + [("intensity", "f4", 12, F255), ("timestamp", "f8", 16, TIME),
                               ("ring", "u2", 24, _ring)]),
    "hesai_uint8": (32, XYZ + [("intensity", "u1", 12, _level), ("timestamp", "f8", 16, TIME),
                               ("ring", "u2", 24, _ring)]),
}
EIGHT_BIT = {"ouster_reflectivity", "livox", "hesai_uint8"}
# the rule each layout's note names
RULES = {"velodyne22": "field 'intensity' (float32) / 255 (max 168.3 in the first scan: the "
                       "0..255 convention)",
         "ouster_reflectivity": "field 'reflectivity' (uint16) / 255 (max 168 in the first "
                                "scan: an 8-bit value in a 16-bit field)",
         "livox": "field 'reflectivity' (uint8) / 255 (uint8 0..255)",
         "hesai_uint8": "field 'intensity' (uint8) / 255 (uint8 0..255)"}
CODES = {"i1": 1, "u1": 2, "i2": 3, "u2": 4, "i4": 5, "u4": 6, "f4": 7, "f8": 8}


def layout_cloud(msgs: _Msgs, points: np.ndarray, header, step: int, fields):
    """A PointCloud2 holding ``points`` (.bin rows) in a driver's layout."""
    dtype = np.dtype({"names": [f[0] for f in fields], "formats": ["<" + f[1] for f in fields],
                      "offsets": [f[2] for f in fields], "itemsize": step})
    cloud = np.zeros(points.shape[0], dtype=dtype)
    for name, kind, _, values in fields:
        cloud[name] = values(points).astype(kind)
    point_field = msgs.types["sensor_msgs/msg/PointField"]
    return msgs.types["sensor_msgs/msg/PointCloud2"](
        header=header, height=1, width=points.shape[0],
        fields=[point_field(name=n, offset=o, datatype=CODES[k], count=1)
                for n, k, o, _ in fields],
        is_bigendian=False, point_step=step, row_step=step * points.shape[0],
        data=np.frombuffer(cloud.tobytes(), np.uint8), is_dense=True)


def write_layout_bag(out: Path, layout: str) -> Path:
    """The sample drive as a ROS 2 MCAP whose clouds are in ``layout`` (see `LAYOUTS`)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    step, fields = LAYOUTS[layout]
    drive, msgs = Drive(DRIVE), _Msgs(ros1=False)
    types = {"points": "sensor_msgs/msg/PointCloud2", "info": "sensor_msgs/msg/CameraInfo",
             "tf": "tf2_msgs/msg/TFMessage", "image": "sensor_msgs/msg/Image"}
    topics = {"points": TOPICS["points"], "info": TOPICS["camera_info"],
              "tf": TOPICS["tf_static"], "image": TOPICS["image"]}
    with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {k: writer.add_connection(topics[k], types[k], typestore=msgs.store)
                 for k in topics}

        def put(key, stamp, msg):
            writer.write(conns[key], stamp, msgs.serialize(msg, types[key]))

        first = int(drive.lidar.stamps[0])
        put("tf", first, msgs.tf_static(msgs.header(first, CAMERA_FRAME),
                                        drive.calib.Tr_velo_to_cam))
        size = drive.image_size or (0, 0)
        for stamp, _, stream, index in _events(drive):
            if stream == "points":
                points = _raw_points(drive.lidar.files[index])
                put("points", stamp, layout_cloud(msgs, points, msgs.header(
                    stamp, LIDAR_FRAME), step, fields))
                continue
            image, info, size = _camera_messages(msgs, drive, index, stamp, "bgr8", size)
            put("image", stamp, image)
            put("info", stamp, info)
    return out


@pytest.fixture(scope="module")
def quantized_twin(tmp_path_factory) -> Path:
    """The sample drive with reflectance as an 8-bit driver stores it: level / 255."""
    out = tmp_path_factory.mktemp("twin") / "drive"
    shutil.copytree(DRIVE, out)
    for scan in sorted((out / "velodyne_points" / "data").glob("*.bin")):
        points = np.fromfile(scan, "<f4").reshape(-1, 4)
        points[:, 3] = _level(points).astype(np.float32) / np.float32(255)
        points.tofile(scan)
    return out


def detections(source: Path, out: Path, sets=(), frames: int | None = None):
    """(JSONL bytes of configs/lidar_pillars.yaml on ``source``, notes, warnings)."""
    pipeline = load_pipeline(CONFIG, validate=False)
    apply_cli_sources(pipeline, replay=source, out=out, sets=sets)
    notes, warnings = [], []
    run_pipeline(pipeline.validate(), RunOptions(frames=frames, enforce_deadlines=False,
                                                 write_record=False, note=notes.append,
                                                 warn=warnings.append))
    return out.read_bytes(), notes, warnings


@pytest.fixture(scope="module")
def twins(tmp_path_factory, quantized_twin) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("twins")
    return {"float": detections(DRIVE, root / "f.jsonl")[0],
            "8bit": detections(quantized_twin, root / "q.jsonl")[0]}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_driver_layouts_give_the_kitti_twins_boxes(tmp_path, twins, layout):
    bag = write_layout_bag(tmp_path / f"{layout}.mcap", layout)
    got, notes, warnings = detections(bag, tmp_path / "bag.jsonl")
    expected = twins["8bit" if layout in EIGHT_BIT else "float"]
    assert got.count(b"\n") == 8 and got == expected
    rule = [n for n in notes if "/velodyne_points intensity:" in n]
    assert len(rule) == 1, notes
    assert RULES.get(layout, "/ 255") in rule[0], rule[0]
    assert not any("clamped" in w for w in warnings), warnings


def test_the_rule_is_decided_once_from_the_first_scan(tmp_path):
    bag = write_layout_bag(tmp_path / "v.mcap", "velodyne22")
    drive = BagDrive(bag)
    assert drive.intensity.divisor == 255.0 and drive.intensity.field == "intensity"
    assert sum("intensity:" in n for n in drive.notes) == 1
    assert all(0.0 <= drive.read(k).points[:, 3].max() <= 1.0 for k in range(len(drive)))
    explicit = BagDrive(bag, intensity_scale=1.0)  # as stored: the old behaviour
    assert "field 'intensity' (float32) x 1 (intensity_scale)" in explicit.notes[-1]
    frame = explicit.read(0)
    assert frame.clamped_points > 0 and frame.points[:, 3].max() == 1.0


def test_intensity_scale_reaches_a_shipped_config_through_set(tmp_path, twins):
    bag = write_layout_bag(tmp_path / "livox.mcap", "livox")
    as_stored, notes, warnings = detections(bag, tmp_path / "a.jsonl",
                                            sets=("drive.intensity_scale=1",), frames=2)
    assert any("field 'reflectivity' (uint8) x 1 (intensity_scale)" in n for n in notes), notes
    assert any("clamped" in w for w in warnings), warnings
    assert as_stored != twins["8bit"][:len(as_stored)]
    by_hand, notes, _ = detections(bag, tmp_path / "b.jsonl", frames=2,
                                   sets=(f"drive.intensity_scale={1 / 255!r}",))
    assert any("(uint8) x 0.00392157 (intensity_scale)" in n for n in notes), notes
    back_to_auto, notes, _ = detections(bag, tmp_path / "c.jsonl", frames=2,
                                        sets=("drive.intensity_scale=null",))
    assert back_to_auto == twins["8bit"][:len(back_to_auto)]
    assert any("(uint8) / 255" in n for n in notes), notes
    assert by_hand.count(b"\n") == 2  # * (1/255) may differ from / 255 by an ulp: not compared


def _unsupported_bag(tmp_path: Path, kind: str) -> Path:
    LAYOUTS[f"bad_{kind}"] = (16, XYZ + [("intensity", kind, 12, lambda p: _level(p))])
    try:
        return write_layout_bag(tmp_path / f"bad_{kind}.mcap", f"bad_{kind}")
    finally:
        del LAYOUTS[f"bad_{kind}"]


@pytest.mark.parametrize("kind", ["i1", "i2", "i4", "u4"])
def test_intensity_types_without_a_convention_are_refused(tmp_path, kind):
    bag = _unsupported_bag(tmp_path, kind)
    name = {"i1": "int8", "i2": "int16", "i4": "int32", "u4": "uint32"}[kind]
    with pytest.raises(DriveError, match=rf"{bag}: /velodyne_points message 0: PointCloud2 "
                                         rf"field 'intensity' \({name}\): no convention gives "
                                         r"its scale .* set the replay stage's intensity_scale"):
        BagDrive(bag)
    drive = BagDrive(bag, intensity_scale=1 / 255)  # an explicit scale reads any type
    assert 0.0 < drive.read(0).points[:, 3].max() <= 1.0


def test_later_scans_never_change_the_rule(tmp_path):
    """Scan 0 has NaN intensities only (it decides nothing), scan 1 is 0..1 (decides: as
    stored), scan 2 holds 0..255 values: they are clamped and warned about, not rescaled."""
    written = []

    def strength(points):  # called once per scan, in drive order
        n = points.shape[0]
        values = [np.full(n, np.nan), np.linspace(0, 1, n)][len(written)] \
            if len(written) < 2 else np.full(n, 200.0)
        written.append(n)
        return values

    LAYOUTS["changing"] = (16, XYZ + [("intensity", "f4", 12, strength)])
    try:
        bag = write_layout_bag(tmp_path / "changing.mcap", "changing")
    finally:
        del LAYOUTS["changing"]
    drive = BagDrive(bag)
    assert drive.intensity.divisor is None and drive.intensity.factor is None
    assert ("as stored (max 1 in message 1, the first scan with a finite intensity: 0..1)"
            in drive.notes[-1]), drive.notes
    assert drive.read(0).points.shape[0] == 0  # NaN intensity rows are not measurements
    assert drive.read(1).clamped_points == 0
    frame = drive.read(2)
    assert frame.clamped_points == frame.points.shape[0] and frame.points[:, 3].max() == 1.0


def test_intensity_scale_means_the_same_on_a_kitti_folder():
    """null: a .bin as stored (0..1 by its format, no note); a number multiplies it, as for a
    bag, and the run's note says so."""
    as_stored = Drive(DRIVE).read(0)
    halved = Drive(DRIVE, intensity_scale=0.5)
    assert halved.notes == [f"{DRIVE}: reflectance x 0.5 (intensity_scale)"]
    frame = halved.read(0)
    np.testing.assert_array_equal(frame.points[:, 3], as_stored.points[:, 3] * np.float32(0.5))
    np.testing.assert_array_equal(frame.points[:, :3], as_stored.points[:, :3])
    assert Drive(DRIVE).notes == []
