"""Bad input to the bag source, the bag / convert verbs and make-drive --format: every new
parameter with NaN, inf, huge, empty and wrong-type values -> one clear error, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuvil_perception.errors import DriveError, PipelineError
from cuvil_perception.graph import Pipeline
from cuvil_perception.ops.bag_source import open_recording

REPO = Path(__file__).resolve().parents[2]
NAN, INF = float("nan"), float("inf")

ROWS = [
    ("intensity_scale", NAN, "must be a number in (0, 1e+06]"),
    ("intensity_scale", INF, "must be a number in (0, 1e+06]"),
    ("intensity_scale", -1.0, "must be a number in (0, 1e+06]"),
    ("intensity_scale", 0.0, "must be a number in (0, 1e+06]"),
    ("intensity_scale", 1e300, "must be a number in (0, 1e+06]"),
    ("intensity_scale", "x", "must be a number"),
    ("intensity_scale", None, "must be a number"),
    ("stamp", "wall", "must be one of 'header', 'log'"),
    ("stamp", "", "must be one of 'header', 'log'"),
    ("stamp", 1, "must be a string"),
    ("topics", ["/velodyne_points"], "must be a mapping"),
    ("topics", "points", "must be a mapping"),
    ("topics", {"lidar": "/velodyne_points"}, "unknown stream 'lidar'"),
    ("topics", {"points": ""}, "topics.points must be a topic name"),
    ("topics", {"points": 5}, "topics.points must be a topic name"),
    ("topics", {"image": None}, "topics.image must be a topic name"),
    ("sync_tolerance_ms", NAN, "non-negative number of ms"),
    ("sync_tolerance_ms", INF, "non-negative number of ms"),
    ("sync_tolerance_ms", -5.0, "non-negative number of ms"),
    ("loop", "yes", "must be a boolean"),
]


@pytest.mark.parametrize("param,value,message", ROWS)
def test_bag_params_are_checked_when_the_pipeline_is_built(param, value, message):
    p = Pipeline("bad")
    p.add("drive", "bag", **{param: value})
    with pytest.raises(PipelineError) as info:
        p.validate()
    assert f"stage 'drive': field 'params.{param}'" in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("content", [b"", b"\x00" * 100, b"#ROSBAG V1.2\n", b"SQLite"])
def test_files_that_are_not_bags_or_drives(tmp_path, content):
    path = tmp_path / "drive.mcap"
    path.write_bytes(content)
    with pytest.raises(DriveError, match=rf"{path}: neither a drive folder .* nor a ROS bag"):
        open_recording(path, {"sync_tolerance_ms": 50.0})


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuvil_perception", *args], cwd=REPO,
                          env={**os.environ, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args,fragment", [
    (("convert", "datasets/sample_drive", "{tmp}/o.mcap", "--format", "hdf5"), "--format"),
    (("convert", "datasets/sample_drive", "{tmp}/o.mcap", "--image", "tiff"), "--image"),
    (("convert", "{tmp}", "{tmp}/o.mcap"), "missing stream folder"),
    (("convert", "datasets/sample_drive", "README.md"), "README.md: exists"),
    (("bag", "info", "{tmp}/none.mcap"), "does not exist"),
    (("bag", "info", "README.md", "--topic", "points"), "expected STREAM=TOPIC"),
    (("make-drive", "{tmp}/d.mcap", "--format", "zip"), "--format"),
    (("make-drive", "{tmp}/d.mcap", "--format", "mcap", "--frames", "0"), "--frames"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, fragment):
    result = _cli(*(a.format(tmp=tmp_path) for a in args))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and fragment in result.stderr, result.stderr
