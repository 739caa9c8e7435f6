"""Bags as drives: bags written by rosbags from the sample drive replay to the same JSONL bytes as
the KITTI folder; topic choice, stamps, damaged bags, and the bag / convert / make-drive verbs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.drives import Calibration, load_calibration, write_calibration
from cuvil_perception.drives.bag import BagDrive, bag_image_size, rigid_extrinsic, write_bag
from cuvil_perception.drives.bag.write import _Msgs
from cuvil_perception.errors import DriveError
from cuvil_perception.graph import Pipeline, RunContext, apply_cli_sources, load_pipeline
from cuvil_perception.rt import RunOptions, run_pipeline

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
BAGS = {"mcap": ("a.mcap", "bgr8"), "sqlite3": ("b.db3", "rgb8"), "ros1": ("c.bag", "png"),
        "rosbag2-mcap": ("d", "bgr8")}
REPLAY_PORTS = ("image", "points", "P2", "R0_rect", "Tr_velo_to_cam", "dropped_points")


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bags")
    return {fmt: write_bag(DRIVE, root / name, fmt, encoding).path
            for fmt, (name, encoding) in BAGS.items()}


@pytest.fixture(scope="module")
def rigid_drive(tmp_path_factory) -> Path:
    """The sample drive with the extrinsic a TF can carry (its rotation through a quaternion):
    KITTI's 7-digit R is orthonormal only to ~1e-7, a TF is rigid by construction."""
    out = tmp_path_factory.mktemp("rigid") / "drive"
    shutil.copytree(DRIVE, out)
    calib = load_calibration(out)
    write_calibration(out, Calibration(calib.P2, calib.R0_rect,
                                       rigid_extrinsic(calib.Tr_velo_to_cam), calib.image_size))
    return out


def _replay_jsonl(path: Path, out: Path, op: str = "replay", frames: int | None = None,
                  **params) -> bytes:
    p = Pipeline("bags")
    drive = p.add("drive", op, path=str(path), **params)
    p.add("log", "jsonl", inputs={k: drive.out(k) for k in REPLAY_PORTS}, path=str(out),
          max_values=64)
    run_pipeline(p.validate(), RunOptions(workers=1, frames=frames, enforce_deadlines=False,
                                          write_record=False))
    return out.read_bytes()


@pytest.mark.parametrize("fmt", list(BAGS))
def test_every_bag_format_replays_to_the_kitti_bytes(bags, rigid_drive, tmp_path, fmt):
    expected = _replay_jsonl(rigid_drive, tmp_path / "kitti.jsonl")
    assert expected.count(b"\n") == 8
    assert _replay_jsonl(bags[fmt], tmp_path / "bag.jsonl") == expected


def test_fusion_config_on_a_bag_matches_the_kitti_folder(bags, rigid_drive, tmp_path):
    outputs = []
    for source in (rigid_drive, bags["mcap"]):
        pipeline = load_pipeline(REPO / "configs" / "fusion.yaml", validate=False)
        out = tmp_path / f"{len(outputs)}.jsonl"
        apply_cli_sources(pipeline, replay=source, out=out)
        pipeline.stage("foxglove").params["path"] = str(tmp_path / f"{len(outputs)}.mcap")
        run_pipeline(pipeline.validate(), RunOptions(frames=3, enforce_deadlines=False,
                                                     write_record=False))
        outputs.append(out.read_bytes())
    assert outputs[0].count(b"\n") == 3 and outputs[0] == outputs[1]
    from cuvil_perception.viz import render_run

    pictures = render_run(tmp_path / "1.jsonl", tmp_path / "viz", drive=bags["mcap"], video=False)
    assert len(list(pictures.camera_dir.glob("*.png"))) == 3 and not pictures.skipped


def test_bag_is_recognised_by_content_not_extension(bags, tmp_path):
    odd = tmp_path / "recording.bin"
    shutil.copy(bags["sqlite3"], odd)
    drive = BagDrive(odd)
    assert len(drive) == 8 and drive.image_size == (1242, 375)
    assert bag_image_size(odd) == (1242, 375)


def test_bag_op_with_topics_and_log_stamps(bags, tmp_path):
    chosen = _replay_jsonl(bags["ros1"], tmp_path / "a.jsonl", op="bag",
                           topics={"points": "/velodyne_points"}, stamp="log")
    assert chosen == _replay_jsonl(bags["ros1"], tmp_path / "b.jsonl")  # log == header here
    drive = BagDrive(bags["mcap"], topics={"image": "/camera/image_raw"})
    assert drive.topics["camera_info"] == "/camera/camera_info"
    assert any("points from /velodyne_points (the only" in n for n in drive.notes)


def test_chosen_topics_are_notes_not_warnings(bags, tmp_path):
    """Which topic a bag gave a role is information (``RunOptions.note``, ``run``'s ``note:``
    line), not a warning: nothing is wrong."""
    p = Pipeline("bags")
    drive = p.add("drive", "bag", path=str(bags["mcap"]), topics={"image": "/camera/image_raw"})
    p.add("log", "jsonl", inputs={"points": drive.out("points")}, path=str(tmp_path / "o.jsonl"))
    warnings, notes = [], []
    run_pipeline(p.validate(), RunOptions(workers=1, frames=1, enforce_deadlines=False,
                                          write_record=False, warn=warnings.append,
                                          note=notes.append))
    assert any("points from /velodyne_points (the only" in n for n in notes), notes
    assert not any("the only" in w for w in warnings), warnings


def test_bag_op_loops_with_increasing_times(bags):
    p = Pipeline("loop")
    stage = p.add("drive", "bag", path=str(bags["rosbag2-mcap"]), loop=True)
    op = p.validate().stage("drive").make_op()
    op.open(RunContext())
    stamps = [op.read().timestamp_ns for _ in range(11)]
    op.close()
    assert stamps == sorted(stamps) and len(set(stamps)) == 11 and stage.op == "bag"


def _custom_bag(path: Path, messages: list[tuple[str, str, int, object]]) -> Path:
    """A ROS 2 MCAP written by rosbags with exactly these (topic, type, log ns, message)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    msgs = _Msgs(ros1=False)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for topic, msgtype, log_ns, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=msgs.store)
            writer.write(conns[topic], log_ns, msgs.serialize(msg, msgtype))
    return path


def _sensor_messages(points_topics=("/lidar",), image_topics=("/cam/image",), stamp_shift=0,
                     cloud=None):
    from cuvil_perception.drives.bag import points_to_pointcloud2
    from cuvil_perception.drives.bag.image import bgr_to_image

    msgs = _Msgs(ros1=False)
    out = []
    calib = load_calibration(DRIVE)
    tf = msgs.tf_static(msgs.header(0, "cam"), calib.Tr_velo_to_cam)
    tf.transforms[0].child_frame_id = "lidar"
    out.append(("/tf_static", "tf2_msgs/msg/TFMessage", 1, tf))
    for k in range(3):
        t = 1_000_000_000 + k * 100_000_000
        for topic in points_topics:
            points = np.ones((5, 4), np.float32) if cloud is None else cloud
            message = points_to_pointcloud2(msgs.types, points,
                                            msgs.header(t + stamp_shift, "lidar"))
            out.append((topic, "sensor_msgs/msg/PointCloud2", t, message))
        for topic in image_topics:
            header = msgs.header(t + stamp_shift + 1000, "cam")
            out.append((topic, "sensor_msgs/msg/Image", t + 1000,
                        bgr_to_image(msgs.types, np.zeros((4, 6, 3), np.uint8), header)))
            out.append((topic.rsplit("/", 1)[0] + "/camera_info", "sensor_msgs/msg/CameraInfo",
                        t + 1000, msgs.camera_info(header, calib, (6, 4))))
    return out


def test_topic_auto_selection_errors(tmp_path):
    two = _custom_bag(tmp_path / "two", _sensor_messages(points_topics=("/a", "/b")))
    with pytest.raises(DriveError, match=r"several sensor_msgs/msg/PointCloud2 topics could be "
                                         r"points: /a, /b; choose one with params.topics.points"):
        BagDrive(two)
    assert len(BagDrive(two, topics={"points": "/b"})) == 3
    with pytest.raises(DriveError, match=r"topics.points '/c' is not in the bag "
                                         r"\(sensor_msgs/msg/PointCloud2 topics: /a, /b\)"):
        BagDrive(two, topics={"points": "/c"})
    with pytest.raises(DriveError, match=r"topics.image '/a' is a sensor_msgs/msg/PointCloud2"):
        BagDrive(two, topics={"points": "/a", "image": "/a"})
    cams = _custom_bag(tmp_path / "cams", _sensor_messages(image_topics=("/l/image", "/r/image")))
    drive = BagDrive(cams, topics={"image": "/r/image"})  # camera_info beside the image
    assert drive.topics["camera_info"] == "/r/camera_info"
    none = _custom_bag(tmp_path / "none", _sensor_messages(points_topics=()))
    with pytest.raises(DriveError, match=r"no sensor_msgs/msg/PointCloud2 topic for points"):
        BagDrive(none)


def test_bag_clouds_are_cleaned_like_kitti_scans(tmp_path):
    """A bag is no back door for garbage: out-of-reach rows dropped, reflectance clamped."""
    cloud = np.array([[5, 1, 0, 1e30], [2e3, 0, 0, 0.5], [4, 2, 0, -3], [6, 0, 0, 0.25]],
                     np.float32)
    # as stored (by convention this first scan's max 1e30 would mean 0..255: / 255)
    drive = BagDrive(_custom_bag(tmp_path / "bad", _sensor_messages(cloud=cloud)),
                     intensity_scale=1.0)
    frame = drive.read(0)
    assert (frame.dropped_points, frame.clamped_points) == (1, 2)
    np.testing.assert_array_equal(frame.points[:, 3], [1.0, 0.0, 0.25])
    assert drive.scan_name(0).endswith("bad: /lidar message 0")


def test_header_and_log_stamps_differ_when_the_recorder_lagged(tmp_path):
    bag = _custom_bag(tmp_path / "lag", _sensor_messages(stamp_shift=-30_000_000))
    header, log = BagDrive(bag), BagDrive(bag, stamp="log")
    assert header.lidar.stamps[0] == 970_000_000 and log.lidar.stamps[0] == 1_000_000_000
    assert header.read(0).image.shape == (4, 6, 3) and header.image_size == (6, 4)


def _cut(source: Path, target: Path, fraction: float) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * fraction)])
    return target


def test_truncated_mcap_replays_the_frames_before_the_cut(bags, tmp_path):
    cut = _cut(bags["mcap"], tmp_path / "cut.mcap", 0.6)
    drive = BagDrive(cut)
    assert drive.damage is not None and drive.damage.offset > 0
    assert 2 <= len(drive) < 8
    full = BagDrive(bags["mcap"])
    for k in range(len(drive)):
        np.testing.assert_array_equal(drive.read(k).points, full.read(k).points)
    p = Pipeline("cut")
    source = p.add("drive", "replay", path=str(cut))
    p.add("log", "jsonl", inputs={"points": source.out("points")}, path=str(tmp_path / "o.jsonl"))
    with pytest.raises(DriveError, match=rf"{cut}: damaged or truncated at byte \d+ .*; the "
                                         rf"{len(drive)} frame\(s\) before it were replayed"):
        run_pipeline(p.validate(), RunOptions(workers=1, write_record=False))
    assert (tmp_path / "o.jsonl").read_text().count("\n") == len(drive)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "cuvil_perception", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def _one_line_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [x for x in result.stderr.splitlines()
             if x.strip() and not x.startswith(("warning", "note:"))]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_damaged_bags_are_one_line_errors_with_exit_2(bags, tmp_path):
    cut = _cut(bags["mcap"], tmp_path / "cut.mcap", 0.6)
    _one_line_error(_cli("run", "configs/fusion.yaml", "--replay", str(cut), "--out",
                         str(tmp_path / "x.jsonl"), "--no-deadlines"),
                    str(cut), "damaged or truncated at byte", "frame(s) before it were replayed")
    ros1 = BagDrive(_cut(bags["ros1"], tmp_path / "cut.bag", 0.5))  # no index: front to back
    assert 2 <= len(ros1) < 8 and ros1.bag.recovered
    assert re.fullmatch(rf"{tmp_path}/cut.bag: damaged or truncated at byte \d+ \(record data "
                        r"cut off\)", ros1.damage.describe())
    folder = tmp_path / "rosbag2"
    shutil.copytree(bags["rosbag2-mcap"], folder)
    _cut(folder / "d.mcap", folder / "d.mcap", 0.5)
    cut_folder = BagDrive(folder)
    assert 2 <= len(cut_folder) < 8 and cut_folder.damage.offset > 0
    full = BagDrive(bags["ros1"])
    for k in range(len(ros1)):
        np.testing.assert_array_equal(ros1.read(k).image, full.read(k).image)
    sqlite = tmp_path / "bad.db3"
    data = bytearray(bags["sqlite3"].read_bytes())
    data[4096:12288] = b"\xff" * 8192  # wipe pages after the header
    sqlite.write_bytes(bytes(data))
    with pytest.raises(DriveError, match=rf"{sqlite}"):
        BagDrive(sqlite)
    garbage = tmp_path / "garbage.mcap"
    garbage.write_bytes(b"\x89MCAP0\r\n" + os.urandom(64))
    with pytest.raises(DriveError, match=rf"{garbage}: damaged or truncated at byte \d+"):
        BagDrive(garbage)


def _in_process(*args: str):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def test_bag_info_convert_and_make_drive(bags, tmp_path):
    info = _in_process("bag", "info", str(bags["ros1"]))
    assert info.exit_code == 0, info.output
    for fragment in ("/velodyne_points", "sensor_msgs/msg/PointCloud2", "points", "10.00",
                     "/camera/image_raw/compressed", "camera_info", "/tf_static", "ros1"):
        assert fragment in info.stdout, info.stdout
    as_json = json.loads(_in_process("bag", "info", str(bags["mcap"]), "--json").stdout)
    assert as_json["selection"] == {"points": "/velodyne_points", "image": "/camera/image_raw",
                                    "camera_info": "/camera/camera_info"}
    assert {t["name"]: t["count"] for t in as_json["topics"]} == {
        "/camera/camera_info": 8, "/camera/image_raw": 8, "/tf_static": 1,
        "/velodyne_points": 8}
    cut = _cut(bags["mcap"], tmp_path / "cut.mcap", 0.5)
    damaged = _in_process("bag", "info", str(cut))
    assert damaged.exit_code == 0, damaged.output
    assert "no index (the file was not closed): read front to back" in damaged.stdout
    assert f"damage: {cut}: damaged or truncated at byte" in damaged.stdout
    cut.unlink()
    out = tmp_path / "synth.mcap"
    made = _in_process("make-drive", str(out), "--frames", "2", "--format", "mcap")
    assert made.exit_code == 0, made.output
    assert len(BagDrive(out)) == 2 and not [p for p in tmp_path.iterdir() if p != out]
    converted = _in_process("convert", str(DRIVE), str(tmp_path / "c.db3"), "--image", "jpeg")
    assert converted.exit_code == 0 and "wrote 25 messages" in converted.stdout
    assert BagDrive(tmp_path / "c.db3").camera.msgtype == "sensor_msgs/msg/CompressedImage"
