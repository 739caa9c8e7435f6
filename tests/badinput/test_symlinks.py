"""Bad-input catalogue, symlinks: a symlink loop or a dangling symlink where a verb reads or writes.

A loop (``a -> b -> a``) given as a drive, a run output, a record, a trace or a render input is
a user's file-system mistake: exit 2, one line naming the path, no traceback (pathlib's
``resolve()`` raises ``RuntimeError`` for it before Python 3.13). A loop or a dangling symlink
where ``convert`` or ``make-drive`` would write is an existing entry they did not make: refused,
and the link is left as it was.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive

from ._runner import assert_one_line_error, cli

PIPELINE = ("stages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("symlink-drive") / "drive"
    make_drive(out, 2, seed=9)
    return out


@pytest.fixture
def work(source, tmp_path) -> Path:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "drive").symlink_to(source)
    (tmp_path / "loop_a").symlink_to("loop_b")
    (tmp_path / "loop_b").symlink_to("loop_a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    return tmp_path


RUN = ["run", "p.yaml", "--replay", "drive", "--frames", "1"]
# (row id, arguments, path named in the error, fragment of the error)
ROWS = [
    ("replay-loop", ["run", "p.yaml", "--replay", "loop_a"], "loop_a", "symlink loop"),
    ("inspect-replay-loop", ["inspect", "p.yaml", "--replay", "loop_a"], "loop_a",
     "symlink loop"),
    ("eval-replay-loop", ["eval", "p.yaml", "--replay", "loop_a"], "loop_a", "symlink loop"),
    ("out-loop", RUN + ["--out", "loop_a"], "loop_a", "symlink loop"),
    ("record-loop", RUN + ["--out", "o.jsonl", "--record", "loop_a"], "loop_a", "symlink loop"),
    ("trace-loop", RUN + ["--out", "o.jsonl", "--trace", "loop_a"], "loop_a", "symlink loop"),
    ("render-input-loop", ["render", "loop_a", "--out", "viz"], "loop_a", "symlink loop"),
    ("convert-out-loop", ["convert", "drive", "loop_a"], "loop_a", "symlink loop"),
    ("convert-out-dangling", ["convert", "drive", "dangling"], "dangling", "exists"),
    ("make-drive-loop", ["make-drive", "loop_a", "--frames", "1"], "loop_a", "exists"),
    ("make-drive-bag-loop", ["make-drive", "loop_a", "--frames", "1", "--format", "mcap",
                             "--force"], "loop_a", "symlink loop"),
]


@pytest.mark.parametrize("args,named,fragment", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_symlink_loops_and_dangling_links_are_one_line_errors(work, args, named, fragment):
    links = {name: os.readlink(work / name) for name in ("loop_a", "loop_b", "dangling")}
    result = cli(*args, cwd=work)
    assert_one_line_error(result, named, fragment)
    assert {name: os.readlink(work / name) for name in links} == links
    assert not (work / "nowhere").exists()


def test_make_drive_force_replaces_a_linked_stream_folder_not_its_target(work, source):
    """--force removes OUT's drive entries; one that is a symlink loses the link, and the
    folder it points at (the user's data) is left whole."""
    out = work / "out"
    assert cli("make-drive", str(out), "--frames", "1", cwd=work).code == 0
    shutil.rmtree(out / "velodyne_points")  # the user links their own scans in its place
    (out / "velodyne_points").symlink_to(source / "velodyne_points")
    scans = sorted((source / "velodyne_points" / "data").iterdir())
    result = cli("make-drive", str(out), "--frames", "1", "--force", cwd=work)
    assert result.code == 0 and not result.crash, result.stderr + result.crash
    assert not (out / "velodyne_points").is_symlink()
    assert sorted((source / "velodyne_points" / "data").iterdir()) == scans
