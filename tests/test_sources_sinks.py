"""Source ops (replay, camera), sink ops (jsonl, png) and the demo's LiDAR ops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.errors import CameraError, PipelineError
from cuvil_perception.graph import FrameInfo, Pipeline, RunContext, load_pipeline
from cuvil_perception.ops.lidar import bev_image, crop_mask
from cuvil_perception.ops.sinks import encode_array

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def drive_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("drv") / "drive"
    make_drive(out, 3, seed=31)
    return out


def _op(stage_id: str, op: str, inputs: dict | None = None, **params):
    """A validated stage; ``inputs`` are wired to a replay stage called 'drive'."""
    p = Pipeline("t")
    if inputs:
        p.add("drive", "replay", path="unused")
    p.add(stage_id, op, inputs=inputs, **params)
    return p.validate().stage(stage_id)


# -- replay ---------------------------------------------------------------------------------

def test_replay_ports_and_frames(drive_dir):
    stage = _op("drive", "replay", path=str(drive_dir))
    specs = stage.output_specs
    assert specs["image"].shape == (375, 1242, 3) and specs["points"].shape == (None, 4)
    assert specs["P2"].shape == (3, 4) and specs["labels"].shape == (None, 12)
    op = stage.make_op()
    op.open(RunContext())
    assert len(op) == 3
    stamps = []
    for _ in range(3):
        sample = op.read()
        for name, spec in specs.items():
            assert spec.check_value(sample.outputs[name]) is None, name
        assert sample.timestamp_ns == sample.stamps["points"]
        assert abs(sample.stamps["image"] - sample.stamps["points"]) < 50_000_000
        stamps.append(sample.timestamp_ns)
    assert op.read() is None and stamps == sorted(stamps)
    op.close()


def test_replay_dims_unknown_without_path_and_loop_keeps_time_increasing(drive_dir):
    assert _op("drive", "replay").output_specs["image"].shape == (None, None, 3)
    op = _op("drive", "replay", path=str(drive_dir), loop=True).make_op()
    op.open(RunContext())
    assert len(op) == 0  # unbounded
    stamps = [op.read().timestamp_ns for _ in range(7)]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    op.close()


def test_replay_is_deterministic(drive_dir):
    def run():
        op = _op("drive", "replay", path=str(drive_dir)).make_op()
        op.open(RunContext())
        out = [op.read() for _ in range(3)]
        op.close()
        return out

    for a, b in zip(run(), run()):
        assert a.timestamp_ns == b.timestamp_ns
        for name in a.outputs:
            assert np.array_equal(a.outputs[name], b.outputs[name])


def test_replay_negative_tolerance_is_a_pipeline_error():
    with pytest.raises(PipelineError, match="sync_tolerance_ms"):
        _op("drive", "replay", sync_tolerance_ms=-1)


# -- camera ---------------------------------------------------------------------------------

def _video(path: Path, frames: int = 12) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    assert writer.isOpened()
    for i in range(frames):
        writer.write(np.full((48, 64, 3), (i * 20, 255 - i * 20, 100), dtype=np.uint8))
    writer.release()
    return path


def test_camera_reads_a_video_file(tmp_path):
    video = _video(tmp_path / "clip.avi")
    op = _op("cam", "camera", device=str(video)).make_op()
    assert op.live is False
    op.open(RunContext())
    samples = []
    while (sample := op.read()) is not None:
        samples.append(sample)
    op.close()
    assert len(samples) == 12
    for i, sample in enumerate(samples):
        image = sample.outputs["image"]
        assert image.dtype == np.uint8 and image.shape == (48, 64, 3)
        assert abs(float(image[..., 0].mean()) - i * 20) < 8  # frames in order (JPEG-lossy)
    stamps = [s.timestamp_ns for s in samples]
    assert stamps[0] == 0 and all(b > a for a, b in zip(stamps, stamps[1:]))
    assert abs(stamps[5] - 500_000_000) < 1_000_000  # from the 10 fps frame positions


@pytest.mark.parametrize("device, message", [
    ("/dev/video99", "camera /dev/video99: no such device"),
    ("99", "camera 99: no such device"),
    ("missing_clip.avi", "camera missing_clip.avi: no such video file"),
])
def test_camera_that_does_not_exist(device, message):
    op = _op("cam", "camera", device=device).make_op()
    assert op.live is (device != "missing_clip.avi")
    with pytest.raises(CameraError) as info:
        op.open(RunContext())
    assert str(info.value) == message or str(info.value).startswith(message)
    assert info.value.exit_code == 2
    op.close()


def test_camera_file_without_frames(tmp_path):
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"not a video at all" * 10)
    op = _op("cam", "camera", device=str(junk)).make_op()
    with pytest.raises(CameraError, match=f"camera {junk}: "):
        op.open(RunContext())


# -- jsonl ----------------------------------------------------------------------------------

def test_encode_array_schema_and_float_text():
    enc = encode_array(np.array([0.1, 1.5, np.nan, -np.inf], dtype=np.float32), 100)
    assert enc == {"dtype": "float32", "shape": [4], "data": [0.1, 1.5, "NaN", "-Infinity"]}
    assert json.dumps(encode_array(np.array([[1 / 3]]), 10)) == \
        '{"dtype": "float64", "shape": [1, 1], "data": [[0.3333333333333333]]}'
    values = np.random.default_rng(0).normal(size=200).astype(np.float32)
    back = np.array(encode_array(values, 1000)["data"], dtype=np.float32)
    assert np.array_equal(back, values)  # shortest text still reads back bit-exact
    assert encode_array(np.int64(7), 1) == {"dtype": "int64", "shape": [], "data": 7}
    assert encode_array(np.zeros((0, 12), np.float32), 10)["data"] == []
    big = encode_array(np.arange(20, dtype=np.uint8), 10)
    assert "data" not in big and len(big["sha256"]) == 64


def _jsonl_run(path: Path, frames: int) -> bytes:
    p = Pipeline("t")
    p.add("drive", "replay", path="unused")
    p.add("log", "jsonl", inputs={"P2": "drive/P2", "labels": "drive/labels",
                                  "points": "drive/points"}, path=str(path), max_values=64)
    op = p.validate().stage("log").make_op()
    op.open(RunContext())
    rng = np.random.default_rng(1)
    for i in range(frames):
        inputs = {"P2": np.eye(3, 4), "labels": rng.normal(size=(2, 12)).astype(np.float32),
                  "points": rng.normal(size=(100, 4)).astype(np.float32)}
        op.process(inputs, FrameInfo(i, 1000 + i, {"points": 1000 + i, "image": 999 + i},
                                     {"det/boxes": i - 1} if i else {}))
    op.close()
    return path.read_bytes()


def test_jsonl_lines_and_determinism(tmp_path):
    first = _jsonl_run(tmp_path / "a" / "deep" / "run.jsonl", 3)
    assert first == _jsonl_run(tmp_path / "b.jsonl", 3)
    lines = first.decode().splitlines()
    assert len(lines) == 3
    record = json.loads(lines[2])
    assert record["frame"] == 2 and record["timestamp_ns"] == 1002
    assert record["stamps"] == {"image": 1001, "points": 1002}
    assert record["stale"] == {"det/boxes": 1}
    assert record["outputs"]["P2"]["data"][0] == [1.0, 0.0, 0.0, 0.0]
    assert record["outputs"]["labels"]["shape"] == [2, 12]
    assert "sha256" in record["outputs"]["points"]


_KILL_SCRIPT = """
import sys, time
import numpy as np
from pathlib import Path
from cuvil_perception.graph import FrameInfo, PortSpec, RunContext
from cuvil_perception.ops.sinks import JsonlSink

op = JsonlSink({"path": Path(sys.argv[1]), "max_values": 10**6, "fsync": False},
               {"x": PortSpec("x", "float32", (None,))})
op.open(RunContext())
rng = np.random.default_rng(0)
for i in range(10**6):
    op.process({"x": rng.normal(size=20000).astype(np.float32)}, FrameInfo(i, i))
    time.sleep(0.005)
"""


def test_jsonl_survives_sigkill(tmp_path):
    out = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(out)],
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= 4:
                break
            if proc.poll() is not None:
                pytest.fail(f"writer exited early: {proc.stderr.read().decode()}")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    data = out.read_bytes()
    lines = data.split(b"\n")
    assert lines[-1] == b""  # ends with a whole line
    assert len(lines) - 1 >= 4
    for number, line in enumerate(lines[:-1]):
        record = json.loads(line)
        assert record["frame"] == number and record["outputs"]["x"]["shape"] == [20000]


# -- png ------------------------------------------------------------------------------------

def test_png_sink_writes_images(tmp_path):
    p = Pipeline("t", base_dir=tmp_path)
    p.add("bev", "lidar.bev", inputs={"points": "drive/points"})
    p.add("drive", "replay", path="unused")
    p.add("out", "png", inputs={"bev": "bev/image", "cam": "drive/image"}, dir="frames")
    op = p.validate().stage("out").make_op()
    op.open(RunContext())
    bev = np.random.default_rng(2).integers(0, 255, size=(432, 496, 3), dtype=np.uint8)
    cam = np.zeros((20, 30, 3), dtype=np.uint8)
    op.process({"bev": bev, "cam": cam}, FrameInfo(7, 0))
    assert np.array_equal(cv2.imread(str(tmp_path / "frames" / "bev" / "000007.png")), bev)
    assert (tmp_path / "frames" / "cam" / "000007.png").is_file()


def test_png_sink_rejects_non_images():
    p = Pipeline("t")
    p.add("drive", "replay", path="unused")
    p.add("out", "png", inputs={"pts": "drive/points"}, dir="frames")
    with pytest.raises(PipelineError, match="inputs.pts"):
        p.validate()


# -- lidar ops and the demo -----------------------------------------------------------------

def test_crop_bounds_are_low_inclusive_high_exclusive():
    pts = np.array([[0, 0, 0, 0], [69.12, 0, 0, 0], [10, -39.68, -3, 0], [10, 39.68, 0, 0],
                    [10, 0, 1, 0], [-0.01, 0, 0, 0]], dtype=np.float32)
    mask = crop_mask(pts, [0.0, 69.12], [-39.68, 39.68], [-3.0, 1.0])
    assert mask.tolist() == [True, False, True, False, False, False]


def test_bev_channels_and_static_shape():
    pts = np.array([[0.05, 0.05, -1.0, 0.5], [0.06, 0.07, 0.0, 0.2], [3.95, -1.95, -2.0, 1.0]],
                   dtype=np.float32)
    image = bev_image(pts, [0.0, 4.0], [-2.0, 2.0], [-2.0, 2.0], 0.1)
    assert image.shape == (40, 40, 3) and image.dtype == np.uint8
    # (x 0.05, y 0.05): ix 0 -> bottom row 39; iy 20 -> column 40 - 1 - 20 = 19
    assert image[39, 19].tolist() == [128, 128, round(np.log(3) / np.log(64) * 255)]
    # (x 3.95, y -1.95): far row 0, rightmost column 39; lowest height maps to 0
    assert image[0, 39].tolist() == [255, 0, round(np.log(2) / np.log(64) * 255)]
    assert int((image.sum(axis=2) > 0).sum()) == 2
    points = {"points": "drive/points"}
    stage = _op("bev", "lidar.bev", points, x_range=[0, 4], y_range=[-2, 2], resolution=0.1)
    assert stage.output_specs["image"].shape == (40, 40, 3)
    with pytest.raises(PipelineError, match="resolution"):
        _op("bev", "lidar.bev", points, resolution=0)
    with pytest.raises(PipelineError, match="x_range"):
        _op("crop", "lidar.crop", points, x_range=[5, 1])


def test_demo_pipeline_validates_with_static_shapes():
    p = load_pipeline(REPO / "configs" / "demo.yaml")
    assert p.stage("bev").output_specs["image"].shape == (432, 496, 3)
    drive = REPO / "datasets" / "sample_drive"
    assert Path(p.stage("drive").resolved_params["path"]).resolve() == drive.resolve()
    if drive.is_dir():
        assert p.stage("drive").output_specs["image"].shape == (375, 1242, 3)
