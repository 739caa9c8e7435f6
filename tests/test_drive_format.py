"""Adding a drive format is one module and one registry line (docs/drive-format.md): a
throwaway format, written here into a temporary folder, replays through ``run --replay`` and
``inspect`` with the outputs of the drive it was made from, and its row appears in the table
``ops --drive-formats`` generates; the registry picks formats by content and names every format
in its error; the table in docs/drive-format.md is the generated one."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cuvil_perception.drives import Drive, registry
from cuvil_perception.drives.recording import open_recording, recording_image_size
from cuvil_perception.errors import DriveError

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "datasets" / "sample_drive"
PAGE = REPO / "docs" / "drive-format.md"

# The whole format: a file starting with b"NPZDRIVE" and then an .npz of the frames.
MODULE = '''
"""A drive as one file: b"NPZDRIVE" + an .npz (count, scan_ns, image_ns, P2, R0_rect, Tr,
points_K, image_K, labels_K, dropped_K)."""

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from cuvil_perception.drives.calib import Calibration
from cuvil_perception.drives.reader import DriveFrame

MAGIC = b"NPZDRIVE"


class NpzDrive:
    def __init__(self, path):
        self.path = Path(path)
        self.arrays = dict(np.load(io.BytesIO(self.path.read_bytes()[len(MAGIC):])))
        self.lidar = SimpleNamespace(stamps=self.arrays["scan_ns"])
        self.pairs = [(k, k) for k in range(int(self.arrays["count"]))]
        self.calib = Calibration(self.arrays["P2"], self.arrays["R0_rect"], self.arrays["Tr"])
        self.image_size = image_size(self.arrays)
        self.skipped, self.notes = 0, []

    def __len__(self):
        return len(self.pairs)

    def read(self, k):
        a = self.arrays
        return DriveFrame(k, k, k, int(a["scan_ns"][k]), int(a["image_ns"][k]),
                          a[f"points_{k}"], int(a[f"dropped_{k}"]), a[f"image_{k}"],
                          a[f"labels_{k}"])

    def longest_gap(self):
        return None

    def scan_name(self, scan):
        return f"{self.path} scan {scan}"


def image_size(arrays):
    return arrays["image_0"].shape[1], arrays["image_0"].shape[0]


class NpzFormat:
    name = "npz"
    title = "an npz drive"
    holds = "one file: `NPZDRIVE` + an `.npz` of the frames"
    recognised_by = "the magic `NPZDRIVE` (1)"

    def detect(self, path):
        path = Path(path)
        return 1.0 if path.is_file() and path.read_bytes()[:len(MAGIC)] == MAGIC else 0.0

    def open(self, path, sync_tolerance_ms, options):
        return NpzDrive(path)

    def image_size(self, path, options):
        return NpzDrive(path).image_size
'''

PIPELINE = """pipeline: npz
stages:
  - id: drive
    op: replay
  - id: log
    op: jsonl
    inputs: {image: drive/image, points: drive/points, P2: drive/P2, R0_rect: drive/R0_rect,
             Tr_velo_to_cam: drive/Tr_velo_to_cam, labels: drive/labels,
             dropped_points: drive/dropped_points}
    params: {path: out.jsonl}
"""


def _cli(*args: str):
    """``cuvil-perception ARGS`` in this process (the registry line is a monkeypatch)."""
    from cuvil_perception.cli.app import cli

    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def _npz_drive(path: Path, frames: int) -> None:
    """The first ``frames`` frames of the sample drive in the throwaway format."""
    drive = Drive(SAMPLE)
    read = [drive.read(k) for k in range(frames)]
    arrays = {"count": np.array(frames), "P2": drive.calib.P2, "R0_rect": drive.calib.R0_rect,
              "Tr": drive.calib.Tr_velo_to_cam,
              "scan_ns": np.array([f.scan_ns for f in read], dtype=np.int64),
              "image_ns": np.array([f.image_ns for f in read], dtype=np.int64)}
    for k, frame in enumerate(read):
        arrays.update({f"points_{k}": frame.points, f"image_{k}": frame.image,
                       f"labels_{k}": frame.labels, f"dropped_{k}": np.array(frame.dropped_points)})
    with open(path, "wb") as f:
        f.write(b"NPZDRIVE")
        np.savez(f, **arrays)


@pytest.fixture
def npz_format(tmp_path, monkeypatch):
    """The throwaway module, and its registry line (what an edit of drives/registry.py adds)."""
    (tmp_path / "npz_drive_format.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("npz_drive_format")
    monkeypatch.setattr(registry, "FORMATS", [*registry.FORMATS, module.NpzFormat()])
    yield module
    sys.modules.pop("npz_drive_format", None)


def test_a_new_format_replays_like_the_drive_it_came_from(npz_format, tmp_path):
    _npz_drive(tmp_path / "drive.bin", 3)
    (tmp_path / "pipe.yaml").write_text(PIPELINE)
    runs = {}
    for name, replay in (("kitti", SAMPLE), ("npz", tmp_path / "drive.bin")):
        out = tmp_path / f"{name}.jsonl"
        done = _cli("run", str(tmp_path / "pipe.yaml"), "--replay", str(replay), "--frames", "3",
                   "--out", str(out))
        assert done.exit_code == 0, done.output
        runs[name] = out.read_bytes()
    assert runs["npz"] == runs["kitti"] and runs["npz"].count(b"\n") == 3
    shown = _cli("inspect", str(tmp_path / "pipe.yaml"), "--replay", str(tmp_path / "drive.bin"))
    assert shown.exit_code == 0, shown.output
    assert "375, 1242, 3" in shown.stdout  # image shape from the format's image_size


def test_the_registry_picks_by_content_and_names_every_format(npz_format, tmp_path):
    _npz_drive(tmp_path / "drive.mcap", 1)  # the extension says nothing
    assert registry.find_format(tmp_path / "drive.mcap").name == "npz"
    assert recording_image_size(tmp_path / "drive.mcap") == (1242, 375)
    assert registry.find_format(SAMPLE).name == "kitti"
    assert registry.find_format(tmp_path / "missing").name == "kitti"  # Drive says what is missing
    (tmp_path / "junk").write_bytes(b"\x00" * 64)
    assert recording_image_size(tmp_path / "junk") is None
    with pytest.raises(DriveError, match=r"junk: neither a drive folder \(KITTI raw layout\) "
                       r"nor a ROS bag or MCAP file nor an npz drive \(judged by"):
        open_recording(tmp_path / "junk")


def test_a_rosbag2_folder_wins_over_a_kitti_layout(tmp_path):
    """A tie-break that matters: ``metadata.yaml`` is a marker, ``velodyne_points/`` a layout."""
    (tmp_path / "velodyne_points").mkdir()
    assert registry.find_format(tmp_path).name == "kitti"
    (tmp_path / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    assert registry.find_format(tmp_path).name == "rosbag2"


def _page_table() -> str:
    """The table after the ``generated by`` marker of docs/drive-format.md, up to a blank line."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"^<!-- generated by `cuvil-perception ops --drive-formats`[^\n]*-->\n"
                      r"((?:\|[^\n]*\n)+)", text, flags=re.M)
    assert found, "docs/drive-format.md: no generated table of drive formats"
    return found.group(1)


def test_the_docs_table_is_the_generated_one():
    shown = _cli("ops", "--drive-formats")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == registry.formats_markdown()
    assert _page_table() == shown.stdout, (
        "docs/drive-format.md: the table of drive formats is out of date with the formats' "
        "declarations: replace it with the output of `cuvil-perception ops --drive-formats`")
    rows = shown.stdout.splitlines()[2:]
    assert [row.split(" | ")[1] for row in rows] == [f"`{f.name}`" for f in registry.FORMATS]
    for args in (("ops", "--drive-formats", "replay"), ("ops", "--drive-formats", "--markdown")):
        refused = _cli(*args)
        assert refused.exit_code == 2 and "--drive-formats" in refused.output, refused.output


def test_a_new_format_has_its_row_in_the_generated_table(npz_format):
    """Its module declares the row; the table regenerated from the registry shows it last."""
    shown = _cli("ops", "--drive-formats")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(_page_table())  # the built-in rows, then the new one
    assert shown.stdout.splitlines()[-1] == (
        "| one file: `NPZDRIVE` + an `.npz` of the frames | `npz` | the magic `NPZDRIVE` (1) | "
        "`npz_drive_format` |")
