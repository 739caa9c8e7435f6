"""``bag info`` shows what ``ros2 bag info`` shows (storage id, files, duration, start, end,
message count, per topic serialization format and offered QoS) on bags written by rosbags from
the sample drive, checked against the ``mcap`` library's own summary and rosbags' reader, and
QoS read from ``metadata.yaml`` when a rosbag2 folder has it (either rosbag2 layout)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from cuvil_perception.drives.bag import write_bag

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
BAGS = {"mcap": "a.mcap", "sqlite3": "b.db3", "ros1": "c.bag", "rosbag2-mcap": "d",
        "rosbag2-sqlite3": "e"}
STORAGE = {"mcap": "mcap", "sqlite3": "sqlite3", "ros1": "ros1", "rosbag2-mcap": "mcap",
           "rosbag2-sqlite3": "sqlite3"}
COUNTS = {"/camera/camera_info": 8, "/camera/image_raw": 8, "/tf_static": 1,
          "/velodyne_points": 8}
STATIC_QOS = "reliable, transient_local, keep_last 1"  # what tf2's static broadcaster offers


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bags")
    return {fmt: write_bag(DRIVE, root / name, fmt).path for fmt, name in BAGS.items()}


def _cli(*args: str):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    result = CliRunner().invoke(cli, ["bag", "info", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("fmt", list(BAGS))
def test_info_says_what_ros2_bag_info_says(bags, fmt):
    info = json.loads(_cli(str(bags[fmt]), "--json"))
    assert info["storage_id"] == STORAGE[fmt]
    assert {t["name"]: t["count"] for t in info["topics"]} == COUNTS
    assert info["message_count"] == sum(COUNTS.values()) == 25
    assert info["duration_ns"] == info["end_ns"] - info["start_ns"] > 0
    files = info["files"]
    assert len(files) == 1 and files[0]["bytes"] > 0
    assert files[0]["path"] == (bags[fmt].name if not bags[fmt].is_dir() else
                                f"{bags[fmt].name}.{'mcap' if 'mcap' in fmt else 'db3'}")
    formats = {t["serialization_format"] for t in info["topics"]}
    assert formats == ({"ros1"} if fmt == "ros1" else {"cdr"})
    qos = {t["name"]: t["offered_qos_profiles"] for t in info["topics"]}
    if fmt == "ros1":  # no QoS in ROS 1: /tf_static is latched instead
        assert not any(qos.values())
        assert [t["name"] for t in info["topics"] if t["ros1_latching"]] == ["/tf_static"]
    else:
        assert [(p["reliability"], p["durability"], p["history"], p["depth"])
                for p in qos["/tf_static"]] == [("reliable", "transient_local", "keep_last", 1)]
    text = _cli(str(bags[fmt]))
    for line in (f"Storage id:    {STORAGE[fmt]} (", "Messages:      25",
                 f"Start:         {info['start_utc']} ({info['start_ns'] // 10**9}.",
                 f"End:           {info['end_utc']}",
                 f"Duration:      {info['duration_ns'] / 1e9:.9f} s", f"Files:         "
                 f"{files[0]['path']} ("):
        assert line in text, (line, text)
    assert ("QoS offered on /tf_static: " + ("latching (ROS 1)" if fmt == "ros1" else
                                             STATIC_QOS)) in text


def test_counts_and_times_agree_with_the_mcap_librarys_own_summary(bags):
    from mcap.reader import make_reader

    info = json.loads(_cli(str(bags["mcap"]), "--json"))
    with open(bags["mcap"], "rb") as f:
        summary = make_reader(f).get_summary()
    stats = summary.statistics
    counts = {summary.channels[c].topic: n for c, n in stats.channel_message_counts.items()}
    assert {t["name"]: t["count"] for t in info["topics"]} == counts
    assert (info["message_count"], info["start_ns"], info["end_ns"]) == \
        (stats.message_count, stats.message_start_time, stats.message_end_time)
    assert info["start_utc"] == "2026-01-01 11:59:59.999868793 UTC"  # the drive's first stamp
    encodings = {c.topic: c.message_encoding for c in summary.channels.values()}
    assert {t["name"]: t["serialization_format"] for t in info["topics"]} == encodings


@pytest.mark.parametrize("layout", ["list", "humble string"])
def test_qos_comes_from_metadata_yaml_when_the_folder_has_it(bags, tmp_path, layout):
    """A rosbag2 folder's metadata.yaml wins over the storage file's copy; rosbag2 before Iron
    wrote the profiles as a YAML string of numbers, later ones as a list of names."""
    folder = tmp_path / "d"
    shutil.copytree(bags["rosbag2-mcap"], folder)
    meta_path = folder / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    topics = meta["rosbag2_bagfile_information"]["topics_with_message_count"]
    static = next(t["topic_metadata"] for t in topics
                  if t["topic_metadata"]["name"] == "/tf_static")
    profile = dict(static["offered_qos_profiles"][0], depth=5, reliability="best_effort")
    if layout == "humble string":  # enum values as numbers: keep_last 1, best_effort 2, ...
        numbers = dict(profile, history=1, reliability=2, durability=1, liveliness=1)
        static["offered_qos_profiles"] = yaml.safe_dump([numbers])
    else:
        static["offered_qos_profiles"] = [profile]
    meta_path.write_text(yaml.safe_dump(meta))
    text = _cli(str(folder))
    assert "QoS offered on /tf_static: best_effort, transient_local, keep_last 5" in text
    (entry,) = [t for t in json.loads(_cli(str(folder), "--json"))["topics"]
                if t["name"] == "/tf_static"]
    assert entry["offered_qos_profiles"][0]["depth"] == 5
