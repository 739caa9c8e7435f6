"""Pictures: camera and BEV images of the right size, and an MP4 OpenCV reads back."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner

from cuvil_perception.drives import Drive
from cuvil_perception.errors import UsageError
from cuvil_perception.ops.sinks import encode_array
from cuvil_perception.viz import (BevView, Mp4Writer, compose, draw_bev, draw_boxes_bev,
                                  render_result, render_run)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "datasets" / "sample_drive"


def read_video(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    assert cap.isOpened(), path
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    return frames


def write_run(path: Path, drive: Path, frames: list[int]) -> None:
    """A run output as the jsonl sink writes it: the labels as fused-looking detections."""
    opened = Drive(drive)
    lines = []
    for index in frames:
        data = opened.read(index)
        labels = data.labels
        dets = np.concatenate([labels[:, 8:12], np.full((len(labels), 1), 0.9, np.float32),
                               labels[:, :1]], axis=1)
        outputs = {"detections": encode_array(dets, 4096),
                   "boxes": encode_array(labels[:, 1:8], 4096),
                   "labels": encode_array(labels[:, 0].astype(np.int32), 4096)}
        lines.append(json.dumps({"frame": index, "timestamp_ns": data.scan_ns,
                                 "stamps": {"points": data.scan_ns, "image": data.image_ns},
                                 "stale": {}, "outputs": outputs}))
    path.write_text("\n".join(lines) + "\n")


def test_render_writes_images_and_a_readable_mp4(sample_drive, tmp_path) -> None:
    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [0, 2, 3])
    view = BevView(resolution=0.2)
    summary = render_run(run, tmp_path / "viz", drive=sample_drive, view=view, ground_truth=True)
    assert summary.frames == 3 and summary.skipped == []
    width, height = Drive(sample_drive).image_size
    assert view.size == (397, 346)
    for index in (0, 2, 3):
        camera = cv2.imread(str(summary.camera_dir / f"{index:06d}.png"))
        bev = cv2.imread(str(summary.bev_dir / f"{index:06d}.png"))
        assert camera.shape == (height, width, 3)
        assert bev.shape == (view.size[1], view.size[0], 3)
    drawn = cv2.imread(str(summary.camera_dir / "000000.png"))
    assert np.abs(drawn.astype(int) - Drive(sample_drive).read(0).image).sum() > 0  # boxes drawn
    frames = read_video(summary.video)
    assert len(frames) == 3
    expected = compose(np.zeros((height, width, 3), np.uint8),
                       np.zeros((view.size[1], view.size[0], 3), np.uint8)).shape
    assert frames[0].shape == expected


def test_render_finds_the_drive_through_the_run_record(sample_drive, tmp_path) -> None:
    from cuvil_perception.cli.render_cmd import render_cmd
    from cuvil_perception.graph import apply_cli_sources, load_pipeline
    from cuvil_perception.rt import RunOptions, run_pipeline

    out = tmp_path / "run" / "detections.jsonl"
    p = load_pipeline(REPO / "configs" / "fusion.yaml", validate=False)
    apply_cli_sources(p, replay=sample_drive, out=out)
    p.validate()
    run = run_pipeline(p, RunOptions(frames=2, enforce_deadlines=False))
    direct = render_result(p, run, tmp_path / "direct", video=False)  # what run --viz calls
    assert direct.frames == 2 and direct.video is None
    result = CliRunner().invoke(render_cmd, [str(out), "--out", str(tmp_path / "viz")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "viz" / "camera").iterdir()) == \
        ["000000.png", "000001.png"]
    assert len(read_video(tmp_path / "viz" / "drive.mp4")) == 2


def test_render_without_a_drive_is_a_usage_error(sample_drive, tmp_path) -> None:
    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [0])
    with pytest.raises(UsageError, match="--drive"):
        render_run(run, tmp_path / "viz")


def test_frames_not_in_the_drive_are_skipped(sample_drive, tmp_path) -> None:
    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [1])
    doc = json.loads(run.read_text())
    doc["stamps"]["points"] += 12345
    run.write_text(json.dumps(doc) + "\n")
    seen = []
    summary = render_run(run, tmp_path / "viz", drive=sample_drive, video=False, warn=seen.append)
    assert summary.frames == 0 and summary.skipped == [1] and "skipped" in seen[0]


def test_bev_geometry() -> None:
    view = BevView(x_range=(0.0, 40.0), y_range=(-20.0, 20.0), resolution=0.5)
    assert view.size == (80, 80)
    # a point 10 m ahead and 5 m to the left: row (40 - 10) / 0.5, column (20 - 5) / 0.5
    np.testing.assert_allclose(view.to_pixels(np.array([10.0, 5.0])), [30.0, 60.0])
    image = draw_bev(np.array([[10.0, 5.0, 0.0, 0.5], [100.0, 0.0, 0.0, 0.1]], np.float32), view)
    assert image.shape == (80, 80, 3) and image[60, 30].max() > 100
    boxes = np.array([[20.0, 0.0, -1.0, 4.0, 2.0, 1.5, 0.0]])
    draw_boxes_bev(image, boxes, np.array([0]), view)
    assert image[40 - 4, 40].tolist() != [24, 24, 24]  # the front edge at x = 22 m


def test_mp4_writer_rejects_a_size_change(tmp_path) -> None:
    with Mp4Writer(tmp_path / "v.mp4") as writer:
        writer.write(np.zeros((64, 96, 3), np.uint8))
        with pytest.raises(ValueError):
            writer.write(np.zeros((32, 96, 3), np.uint8))
    assert len(read_video(tmp_path / "v.mp4")) == 1


def test_open3d_view_or_clean_fallback(sample_drive, tmp_path) -> None:
    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [0, 1])
    warnings = []
    summary = render_run(run, tmp_path / "viz", drive=sample_drive, open3d=True,
                         warn=warnings.append)
    assert summary.frames == 2
    if summary.scene3d_dir is None:  # no offscreen renderer here: one warning, OpenCV pictures
        assert any("Open3D" in w for w in warnings)
    else:
        views = sorted(summary.scene3d_dir.glob("*.png"))
        assert len(views) == 2 and cv2.imread(str(views[0])).shape == (540, 960, 3)
    frames = read_video(summary.video)
    assert len(frames) == 2


def test_open3d_failure_falls_back(sample_drive, tmp_path, monkeypatch) -> None:
    rendering = pytest.importorskip("open3d.visualization.rendering")

    def no_device(*args, **kwargs):
        raise RuntimeError("no Vulkan device")

    monkeypatch.setattr(rendering, "OffscreenRenderer", no_device)
    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [0])
    warnings = []
    summary = render_run(run, tmp_path / "viz", drive=sample_drive, open3d=True,
                         warn=warnings.append)
    assert summary.scene3d_dir is None and summary.frames == 1
    assert "Open3D" in warnings[0] and "Vulkan" in warnings[0]
    assert len(read_video(summary.video)) == 1


def test_frame_notice_names_the_stage_and_the_reason() -> None:
    """The banner text of each kind of line the jsonl sink writes, with the record's numbers."""
    from cuvil_perception.viz import frame_notice

    miss = {"frame": 3, "stage": "yolo", "kind": "deadline_miss", "elapsed_ms": 69.4,
            "deadline_ms": 50, "action": "drop"}
    notice = frame_notice({"stage": "yolo", "policy": "drop", "reason": "deadline_miss"}, {},
                          [miss])
    assert notice.kind == "dropped" and notice.text == (
        "DROPPED: stage 'yolo' took 69 ms > 50 ms deadline, on_miss: drop; no results "
        "downstream of it")
    notice = frame_notice({"stage": "yolo", "policy": "drop", "reason": "deadline_miss"}, {})
    assert "stage 'yolo' missed its deadline" in notice.text  # no record at hand
    skip = {"frame": 3, "stage": None, "kind": "admission_skip", "predicted_ms": 131.2,
            "deadline_ms": 100.0, "action": "skip"}
    notice = frame_notice({"stage": None, "policy": "skip", "reason": "admission_skip"}, {},
                          [skip])
    assert notice.text == ("SKIPPED at admission: predicted 131 ms > 100 ms budget; no stage "
                           "ran, no results")
    e2e = {"frame": 3, "stage": None, "kind": "e2e_miss", "elapsed_ms": 120.0,
           "deadline_ms": 100, "action": "drop"}
    notice = frame_notice({"stage": None, "policy": "drop", "reason": "e2e_miss"}, {}, [e2e])
    assert notice.text == ("DROPPED before the sinks: frame took 120 ms > 100 ms e2e deadline; "
                           "no results")
    reuse = dict(miss, action="reuse_last")
    notice = frame_notice(None, {"yolo/detections": 2}, [reuse])
    assert notice.kind == "stale" and notice.text == (
        "STALE: yolo/detections reused from frame 2 (yolo took 69 ms > 50 ms deadline)")
    for kept in ("degrade", "keep_late"):  # a late result kept is the frame's own: no banner
        assert frame_notice(None, {}, [dict(miss, action=kept)]) is None
    assert frame_notice(None, {}) is None and frame_notice(None, {}, []) is None


def test_dropped_and_stale_frames_get_a_banner_in_both_pictures(sample_drive, tmp_path) -> None:
    """A dropped frame's pictures (no boxes) and a stale one's (older boxes) say so across the
    top; a frame with its own results has no banner."""
    from cuvil_perception.viz.banner import DROPPED_COLOUR, STALE_COLOUR

    run = tmp_path / "run.jsonl"
    write_run(run, sample_drive, [0, 1, 2])
    lines = [json.loads(line) for line in run.read_text().splitlines()]
    lines[1].update(dropped={"stage": "detect", "policy": "drop", "reason": "deadline_miss"},
                    outputs={})
    lines[2]["stale"] = {"detect/boxes": 0}
    run.write_text("".join(json.dumps(line) + "\n" for line in lines))
    decisions = [{"frame": 1, "stage": "detect", "kind": "deadline_miss", "elapsed_ms": 61.0,
                  "deadline_ms": 40, "action": "drop", "variant": "normal"}]
    (tmp_path / "run.jsonl.record.json").write_text(json.dumps({"decisions": decisions}))
    summary = render_run(run, tmp_path / "viz", drive=sample_drive, video=False)
    assert summary.frames == 3 and summary.marked == [1, 2]
    image0 = Drive(sample_drive).read(0).image
    for index, colour in ((1, DROPPED_COLOUR), (2, STALE_COLOUR)):
        for folder in (summary.camera_dir, summary.bev_dir):
            picture = cv2.imread(str(folder / f"{index:06d}.png"))
            corner = picture[:8, :8].reshape(-1, 3)
            assert (corner == colour).all(), (folder, index)  # the banner's fill
            row = picture[4:20, 8:400]  # its text: white pixels on the fill
            assert (row == 255).all(axis=-1).any(), (folder, index)
    camera0 = cv2.imread(str(summary.camera_dir / "000000.png"))
    assert (camera0[:8, :8] == image0[:8, :8]).all()  # no banner: the drive's own pixels
    bev0 = cv2.imread(str(summary.bev_dir / "000000.png"))
    assert not (bev0[:8, :8].reshape(-1, 3) == DROPPED_COLOUR).all(axis=-1).any()


def test_run_viz_marks_frames_a_deadline_dropped(sample_drive, tmp_path) -> None:
    """End to end: a deadline no stage can make (1 ms, enforced) drops every frame; ``run
    --viz`` draws them with the banner naming the stage, and says how many it marked."""
    from cuvil_perception.cli.app import cli
    from cuvil_perception.viz.banner import DROPPED_COLOUR

    out = tmp_path / "run" / "detections.jsonl"
    result = CliRunner().invoke(cli, [
        "run", str(REPO / "configs" / "lidar_pillars.yaml"), "--replay", str(sample_drive),
        "--frames", "2", "--enforce-deadlines", "--set", "detect.deadline_ms=1",
        "--out", str(out), "--viz", str(tmp_path / "viz")])
    assert result.exit_code == 0, result.output
    assert "marked   2 frame(s)" in result.output
    assert all('"dropped"' in line for line in out.read_text().splitlines())
    for folder in ("camera", "bev"):
        picture = cv2.imread(str(tmp_path / "viz" / folder / "000001.png"))
        assert (picture[:8, :8].reshape(-1, 3) == DROPPED_COLOUR).all()
