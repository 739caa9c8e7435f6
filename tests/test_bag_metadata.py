"""The rosbag2 metadata of every bag convert writes names the files that are really there: in
metadata.yaml of a rosbag2 folder, and in the metadata a single .mcap / .db3 file embeds (what
a reader that trusts it, e.g. rosbags or ``ros2 bag info`` on a folder holding the file, opens)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from cuvil_perception.drives.bag import write_bag
from cuvil_perception.drives.synth import make_drive
from cuvil_perception.errors import UsageError


@pytest.fixture(scope="module")
def drive(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "drive"
    make_drive(folder, 1, 0)
    return folder


def _embedded(path: Path) -> dict:
    """The rosbag2 metadata (rosbag2_bagfile_information) stored inside one bag file."""
    if path.suffix == ".db3":
        with sqlite3.connect(path) as db:
            (text,) = db.execute("SELECT metadata FROM metadata").fetchone()
        return yaml.safe_load(text)
    from mcap.reader import make_reader

    with path.open("rb") as stream:
        (record,) = [m for m in make_reader(stream).iter_metadata() if m.name == "rosbag2"]
    return yaml.safe_load(record.metadata["serialized_metadata"])


def _named(info: dict) -> list[str]:
    return list(info["relative_file_paths"]) + [f["path"] for f in info["files"]]


def _open_with_rosbags(folder: Path) -> int:
    from rosbags.rosbag2 import Reader

    with Reader(folder) as reader:
        return sum(1 for _ in reader.messages())


@pytest.mark.parametrize("fmt, name", [("mcap", "x.mcap"), ("sqlite3", "y.db3")])
def test_a_bag_file_names_itself_in_its_metadata(drive, tmp_path, fmt, name):
    out = write_bag(drive, tmp_path / name, fmt).path
    info = _embedded(out)
    assert set(_named(info)) == {out.name}
    # a folder holding the file and that metadata is a rosbag2 bag rosbags opens
    folder = tmp_path / "as_folder"
    folder.mkdir()
    out.rename(folder / out.name)
    (folder / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}))
    assert _open_with_rosbags(folder) == info["message_count"] > 0


@pytest.mark.parametrize("fmt, name", [("rosbag2-mcap", "f"), ("rosbag2-mcap", "g.mcap"),
                                       ("rosbag2-sqlite3", "h")])
def test_a_bag_folder_names_its_files_in_metadata_yaml(drive, tmp_path, fmt, name):
    out = write_bag(drive, tmp_path / name, fmt).path
    info = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert all((out / named).is_file() for named in _named(info))
    assert sorted(p.name for p in out.iterdir()) == sorted({"metadata.yaml", *_named(info)})
    assert _open_with_rosbags(out) == info["message_count"] > 0


@pytest.mark.parametrize("fmt, name", [("mcap", "x"), ("sqlite3", "y.mcap"), ("mcap", "z.MCAP")])
def test_a_bag_file_without_its_extension_is_refused(drive, tmp_path, fmt, name):
    with pytest.raises(UsageError, match="must end in"):
        write_bag(drive, tmp_path / name, fmt)
    assert list(tmp_path.iterdir()) == []
