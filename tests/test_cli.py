"""The command line as a user meets it: help, exit codes, one-line errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERBS = ("run", "inspect", "ops", "make-drive", "compile", "cache", "bench", "eval", "render",
         "bag", "convert")


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}  # rich wraps tables at the terminal width
    return subprocess.run([sys.executable, "-m", "cuvil_perception", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_usage_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help(verb):
    result = cli(verb, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout


def test_unknown_verb_is_a_usage_error():
    result = cli("frobnicate")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_inspect_prints_stages_with_shapes(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "pipeline: crop\nstages:\n"
        "  - {id: drive, op: replay}\n"
        "  - {id: crop, op: lidar.crop, inputs: {points: drive/points}, deadline_ms: 4}\n")
    result = cli("inspect", str(tmp_path / "p.yaml"), "--replay", "datasets/sample_drive")
    assert result.returncode == 0, result.stderr
    for text in ("drive", "crop", "lidar.crop", "float32[N, 4]", "4 ms"):
        assert text in result.stdout


def test_malformed_yaml_gives_file_line_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("stages:\n  - id: a\n    op: replay\n    deadline_ms: -3\n")
    assert_usage_error(cli("inspect", str(path)), f"{path}:4:18", "deadline_ms", "positive")


def test_yaml_that_is_a_list_is_a_usage_error(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- id: a\n  op: replay\n")
    assert_usage_error(cli("inspect", str(path)), f"{path}:1:1", "must be a mapping")


def test_missing_pipeline_file_is_a_usage_error(tmp_path):
    assert_usage_error(cli("inspect", str(tmp_path / "nope.yaml")), "not found")


def test_run_on_a_missing_drive_is_a_usage_error(tmp_path):
    result = cli("run", "configs/demo.yaml", "--replay", str(tmp_path / "no_drive"),
                 "--out", str(tmp_path / "o.jsonl"))
    assert_usage_error(result, "no_drive")


def test_run_on_a_missing_camera_names_the_device(tmp_path):
    path = tmp_path / "cam.yaml"
    path.write_text("stages:\n  - {id: drive, op: replay}\n"
                    "  - {id: out, op: jsonl, inputs: {image: drive/image}}\n")
    result = cli("run", str(path), "--camera", "/dev/video99", "--out", str(tmp_path / "o.jsonl"))
    assert_usage_error(result, "/dev/video99")


def test_camera_on_a_lidar_pipeline_says_what_is_missing(tmp_path):
    result = cli("run", "configs/demo.yaml", "--camera", "/dev/video99",
                 "--out", str(tmp_path / "o.jsonl"))
    assert_usage_error(result, "points", "camera")


def test_inspect_profile_checks_tags_and_writes_nothing(tmp_path):
    result = cli("inspect", "configs/demo.yaml", "--replay", "datasets/sample_drive", "--profile",
                 "--frames", "3")
    assert result.returncode == 0, result.stderr
    assert "tag check over 3 frames" in result.stdout
    for stage in ("drive", "crop", "bev", "images", "log"):
        assert stage in result.stdout


def test_run_with_viz_writes_pictures(tmp_path):
    result = cli("run", "configs/lidar_pillars.yaml", "--replay", "datasets/sample_drive",
                 "--frames", "2", "--out", str(tmp_path / "o.jsonl"),
                 "--viz", str(tmp_path / "viz"))
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "viz" / "bev").glob("*.png"))) == 2
    assert (tmp_path / "viz" / "drive.mp4").is_file()


def test_camera_from_a_video_file_keeps_every_frame(tmp_path):
    import cv2
    import numpy as np

    video = tmp_path / "drive.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 96))
    for k in range(6):
        writer.write(np.full((96, 320, 3), 40 * k, np.uint8))
    writer.release()
    path = tmp_path / "cam.yaml"
    path.write_text("stages:\n  - {id: drive, op: replay}\n"
                    "  - {id: out, op: jsonl, inputs: {image: drive/image},"
                    " params: {max_values: 10}}\n")
    result = cli("run", str(path), "--camera", str(video), "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "o.jsonl").read_text().splitlines()
    assert [json.loads(line)["frame"] for line in lines] == list(range(6))


def test_ops_lists_ops_and_describes_one():
    listing = cli("ops")
    assert listing.returncode == 0, listing.stderr
    for name in ("replay", "camera", "jsonl", "pillars.detect", "yolo.detect", "fusion.associate"):
        assert name in listing.stdout
    detail = cli("ops", "yolo.detect")
    assert detail.returncode == 0, detail.stderr
    for text in ("conf", "0.25", "iou", "0.7", "max_det", "required", "float32[N, 6]"):
        assert text in detail.stdout
    assert_usage_error(cli("ops", "yolo.detekt"), "unknown op", "did you mean 'yolo.detect'")


def test_run_summary_names_detections_by_class(tmp_path):
    result = cli("run", "configs/fusion.yaml", "--replay", "datasets/sample_drive", "--frames", "2",
                 "--no-deadlines", "--out", str(tmp_path / "o.jsonl"), "--summary")
    assert result.returncode == 0, result.stderr
    table = result.stdout[result.stdout.index("detections per frame"):]
    for text in ("yolo", "pillars", "fusion", "car", "pedestrian", "both)"):
        assert text in table


def test_count_by_class_names_known_ids_and_numbers_the_rest():
    import numpy as np

    from cuvil_perception.ops.summary import count_by_class

    assert count_by_class(np.array([2, 0, 0, 7, np.nan]), ("car", "ped", "cyc")) == \
        "2 car, 1 cyc, 1 class 7"
    assert count_by_class(np.array([])) == ""


def _pty_run(*args: str, cwd: Path = REPO) -> tuple[int, str, str]:
    """``cuvil-perception ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the
    terminal received)."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200"}
    process = subprocess.Popen([sys.executable, "-m", "cuvil_perception", *args], cwd=cwd,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=slave)
    os.close(slave)
    received = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed its end
            break
        if not data:
            break
        received.append(data)
    os.close(master)
    stdout = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout=300), stdout, b"".join(received).decode()


def test_make_drive_and_eval_count_frames_on_a_terminal_only(tmp_path):
    """On a terminal, one line rewritten in place (``frame i/N``) and cleared at the end; off
    one (a pipe, a log), no progress at all."""
    drive = tmp_path / "drive"
    code, stdout, terminal = _pty_run("make-drive", str(drive), "--frames", "2")
    assert code == 0 and "wrote 2 frames" in stdout
    assert f"\r{drive}: frame 1/2\r{drive}: frame 2/2\r" in terminal and terminal.endswith("\r")
    assert "\n" not in terminal  # nothing left on the terminal
    pipeline = str(REPO / "configs" / "lidar_pillars.yaml")
    code, stdout, terminal = _pty_run("eval", pipeline, "--replay", str(drive))
    assert code == 0 and "mean" in stdout
    assert "\reval: frame 1/2\reval: frame 2/2\r" in terminal
    piped = cli("make-drive", str(tmp_path / "other"), "--frames", "2")
    assert piped.returncode == 0 and piped.stderr == ""
    piped = cli("eval", pipeline, "--replay", str(drive))
    assert piped.returncode == 0 and "frame" not in piped.stderr
