"""Bad-input catalogue, outputs are files, not names: hard links, symlinked parents, two names of
one file, and two runs on one output.

The output-path rules compare files (device + inode, links resolved), so every row here names a
path that *looks* new but is an input or another output; each is refused with exit 2, one line
naming the path and the rule, and nothing changed. A run holds an exclusive lock on each of its
outputs: a second run on the same ``--out`` stops with exit 2 naming the first one's pid, and
the first run's file is whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.rt.output_lock import hold, lock_path
from cuvil_perception.rt.output_policy import Claim

from ._runner import REPO, assert_one_line_error, assert_unchanged, cli, snapshot

PIPELINE = ("pipeline: outputs\nstages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("identity-drive") / "drive"
    make_drive(out, 4, seed=12)
    return out


@pytest.fixture
def work(source, tmp_path) -> Path:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    os.link(next((source / "velodyne_points" / "data").glob("*.bin")), tmp_path / "scan.bin")
    (tmp_path / "other").mkdir()
    os.link(tmp_path / "p.yaml", tmp_path / "other" / "pipeline-copy.yaml")
    (tmp_path / "scans").symlink_to(source / "velodyne_points" / "data")
    (tmp_path / "prev.jsonl").write_text("")
    os.link(tmp_path / "prev.jsonl", tmp_path / "prev-link.json")
    return tmp_path


def _run(work: Path, *args: str):
    return cli("run", str(work / "p.yaml"), "--replay", _drive(work), *args, cwd=work)


def _drive(work: Path) -> str:
    return str(Path(os.path.realpath(work / "scans")).parents[1])


REFUSED = [
    ("out-is-a-hard-link-to-a-drive-scan", ["--out", "scan.bin"], "input", "scan.bin"),
    ("out-is-a-hard-link-of-the-pipeline-in-another-folder",
     ["--out", "other/pipeline-copy.yaml"], "input", "pipeline-copy.yaml"),
    ("out-under-a-symlinked-parent-inside-the-drive", ["--out", "scans/new.jsonl"], "input",
     "new.jsonl"),
    ("record-is-another-name-of-out", ["--out", "prev.jsonl", "--record", "prev-link.json"],
     "same-output", "prev-link.json"),
]


@pytest.mark.parametrize("args, rule, named", [row[1:] for row in REFUSED],
                         ids=[row[0] for row in REFUSED])
def test_run_refuses_a_file_behind_another_name(work, source, args, rule, named):
    before = snapshot(work / "scan.bin", work / "p.yaml", source)
    result = _run(work, *args)
    assert_one_line_error(result, f"output-path rule '{rule}'", named)
    assert_unchanged(before)


def test_a_held_output_is_refused_naming_the_holder(work):
    out = work / "out.jsonl"
    with hold([Claim("--out", out)]):
        result = _run(work, "--out", "out.jsonl")
        assert_one_line_error(result, "output-path rule 'busy'", "out.jsonl",
                              f"pid {os.getpid()}")
    assert not out.exists()  # refused before any sink opened
    assert not lock_path(out.resolve()).exists()  # released and removed
    assert _run(work, "--out", "out.jsonl", "--frames", "1").code == 0  # free again


def test_a_lock_left_by_a_killed_run_is_taken_over(work):
    stale = lock_path((work / "out.jsonl").resolve())
    stale.write_text("999999 somewhere\n")  # no process holds it
    result = _run(work, "--out", "out.jsonl", "--frames", "1")
    assert result.code == 0, result.stderr
    assert not stale.exists()


def test_two_runs_on_one_out_the_second_is_refused(work):
    """A paced first run holds out.jsonl; the second stops with exit 2 naming its pid; the
    first completes with every frame and a record that says so."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-m", "cuvil_perception", "run", "p.yaml",
                              "--replay", _drive(work), "--out", "out.jsonl", "--rate", "2"],
                             cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = lock_path((work / "out.jsonl").resolve())
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text().strip()) and first.poll() is None:
        assert time.monotonic() < deadline, "the first run never took its lock"
        time.sleep(0.05)
    second = _run(work, "--out", "out.jsonl")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert_one_line_error(second, "output-path rule 'busy'", f"pid {first.pid}")
    lines = (work / "out.jsonl").read_text().splitlines()
    assert [json.loads(line)["frame"] for line in lines] == [0, 1, 2, 3]
    record = json.loads((work / "out.jsonl.record.json").read_text())
    assert record["status"] == "completed" and record["run"]["pid"] == first.pid
