"""The synthetic drive generator: determinism, linear work, plausibility; the make-drive command.

How fast it is (seconds per frame, and where they go) is measured by benchmarks/synth_drive.py.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from cuvil_perception.drives import Drive
from cuvil_perception.drives.synth import make_drive, writer


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    first = _files(make_drive(tmp_path / "a", 2, seed=5).path)
    again = _files(make_drive(tmp_path / "b", 2, seed=5).path)
    other = _files(make_drive(tmp_path / "c", 2, seed=6).path)
    assert first.keys() == again.keys() == other.keys()
    assert len(first) == 12  # 2 png, 2 bin, 2 labels, 4 timestamps files, 2 calibration
    for name in first:
        assert first[name] == again[name], name
    differing = {name for name in first if first[name] != other[name]}
    for name in ("image_02/data/0000000000.png", "velodyne_points/data/0000000001.bin",
                 "labels/0000000000.json", "velodyne_points/timestamps.txt"):
        assert name in differing
    assert "calib_cam_to_cam.txt" not in differing  # the rig does not depend on the seed


def test_frames_do_not_depend_on_drive_length(tmp_path):
    short = _files(make_drive(tmp_path / "short", 1, seed=9).path)
    longer = _files(make_drive(tmp_path / "long", 2, seed=9).path)
    for name in ("image_02/data/0000000000.png", "velodyne_points/data/0000000000.bin",
                 "labels/0000000000.json"):
        assert short[name] == longer[name]


def _counting(monkeypatch, name: str) -> list[float]:
    """Record the time argument of every call of the generator's step ``name``."""
    times, step = [], getattr(writer, name)
    signature = inspect.signature(step)

    def counted(*args, **kwargs):
        times.append(signature.bind(*args, **kwargs).arguments["t"])
        return step(*args, **kwargs)

    monkeypatch.setattr(writer, name, counted)
    return times


def test_twenty_frames_simulated_once_each_and_plausible(tmp_path, monkeypatch):
    scans, renders = _counting(monkeypatch, "scan"), _counting(monkeypatch, "render")
    summary = make_drive(tmp_path / "d", 20, seed=3)
    # The work is linear in the frames: one scan and one render per frame, at the frame's own
    # time (nothing re-simulated from t = 0), so a 100-frame training drive costs 5x this one.
    assert len(scans) == len(renders) == 20
    assert all(a < b for a, b in zip(scans, scans[1:]))
    assert all(a < b for a, b in zip(renders, renders[1:]))
    assert all(90_000 <= n <= 115_000 for n in summary.points)
    drive = Drive(summary.path)
    assert len(drive) == 20
    in_view = 0
    total = 0
    moved = []
    first = None
    for index in range(0, 20, 4):
        labels = drive.read(index).labels
        visible = labels[labels[:, 8] >= 0]
        total += len(labels)
        in_view += int(((visible[:, 1] > 5) & (visible[:, 1] < 50)).sum())
        assert set(np.unique(labels[:, 0]).astype(int)) == {0, 1, 2}
        if first is None:
            first = labels[:, 1].copy()
        else:
            moved.append(np.abs(labels[:, 1] - first).max())
    assert in_view / total > 0.6  # most objects are 5-50 m ahead and inside the camera view
    assert min(moved) > 1.0  # objects move between frames


def test_labels_count_lidar_points_and_sizes(tmp_path):
    out = make_drive(tmp_path / "d", 1, seed=4).path
    doc = json.loads((out / "labels" / "0000000000.json").read_text())
    assert doc["format"] == "cuvil-labels-1"
    sizes = {"car": (3.9, 1.6, 1.56), "pedestrian": (0.8, 0.6, 1.73), "cyclist": (1.76, 0.6, 1.73)}
    for obj in doc["objects"]:
        expected = np.array(sizes[obj["class"]])
        assert np.all(np.abs(np.array(obj["box3d"][3:6]) / expected - 1) <= 0.11)
        assert abs(obj["box3d"][2] - (-1.73 + obj["box3d"][5] / 2)) < 1e-3  # z is box centre
        if obj["box2d"] is not None and obj["box3d"][0] < 30 and obj["occluded"] == 0:
            assert obj["num_lidar_points"] > 10
        assert obj["occluded"] in (0, 1, 2) and 0.0 <= obj["truncated"] <= 1.0


def test_make_drive_command(tmp_path):
    from cuvil_perception.cli.app import cli

    out = tmp_path / "drive"
    runner = CliRunner()
    result = runner.invoke(cli, ["make-drive", str(out), "--frames", "1", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "wrote 1 frames" in result.output and len(Drive(out)) == 1
    refused = runner.invoke(cli, ["make-drive", str(out), "--frames", "2"])
    assert refused.exit_code == 2 and "not empty" in refused.output
    (out / "notes.txt").write_text("kept")
    forced = runner.invoke(cli, ["make-drive", str(out), "--frames", "2", "--seed", "2",
                                 "--force"])
    assert forced.exit_code == 0, forced.output
    assert len(Drive(out)) == 2 and (out / "notes.txt").read_text() == "kept"
    assert runner.invoke(cli, ["make-drive", "--help"]).exit_code == 0
