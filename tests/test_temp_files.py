"""Leftovers of a killed atomic write are removed by a later write, and nothing else is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cuvil_perception import temp_files
from cuvil_perception.output_files import write_bytes_atomic

# A child that writes out.json atomically and is killed (SIGKILL) after the temporary file is
# complete but before the rename: the moment a power cut or an OOM kill would leave it behind.
CHILD = """
import os, sys, time
from cuvil_perception.output_files import write_bytes_atomic
def stall(src, dst):
    print("written", flush=True)
    time.sleep(120)
os.replace = stall
write_bytes_atomic(sys.argv[1], b'{"new": true}' * 1000)
"""


@pytest.fixture(autouse=True)
def fresh_sweeps(monkeypatch):
    """Each test sees its folders unswept, as a new process would."""
    monkeypatch.setattr(temp_files, "_swept", set())


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _killed_mid_write(out: Path, code: str = CHILD) -> list[Path]:
    """Run ``code`` on ``out``, SIGKILL it once it says "written"; the entries it left."""
    child = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline() == "written\n"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    return [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_kill_9_mid_write_leaves_a_temp_the_next_write_removes(tmp_path):
    out = tmp_path / "out.json"
    out.write_text('{"old": true}')
    leftovers = _killed_mid_write(out)
    assert len(leftovers) == 1 and leftovers[0].name.endswith(".tmp")
    assert out.read_text() == '{"old": true}'  # the kill never exposed half a file
    write_bytes_atomic(tmp_path / "other.json", b"{}")  # any later write into the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json", "out.json"]


# make-drive --format mcap, killed while its temporary KITTI folder beside OUT is being filled.
MAKE_DRIVE_CHILD = """
import sys, time
import cuvil_perception.drives.synth as synth
from cuvil_perception.cli.app import main
def stall(folder, frames, seed, progress=None):
    (folder / "half-written").write_bytes(b"x")
    print("written", flush=True)
    time.sleep(120)
synth.make_drive = stall
main(["make-drive", sys.argv[1], "--format", "mcap", "--frames", "1"])
"""


def test_kill_9_during_make_drive_leaves_a_folder_the_next_write_removes(tmp_path):
    leftovers = _killed_mid_write(tmp_path / "d.mcap", MAKE_DRIVE_CHILD)
    assert [p.name for p in tmp_path.iterdir()] == [p.name for p in leftovers]
    assert len(leftovers) == 1 and (leftovers[0] / "half-written").exists()
    write_bytes_atomic(tmp_path / "other.json", b"{}")
    assert [p.name for p in tmp_path.iterdir()] == ["other.json"]


def _name(output: str, pid: int, host: str | None = None) -> str:
    return f".{output}.cuvil-{host or temp_files.host_tag()}-{pid}-0123456789ab.tmp"


def test_only_our_own_stale_temps_are_removed(tmp_path):
    dead = _dead_pid()
    stale_file, stale_dir = tmp_path / _name("a.json", dead), tmp_path / _name("drive_1", dead)
    stale_file.write_bytes(b"half")
    (stale_dir / "sub").mkdir(parents=True)
    (stale_dir / "sub" / "x.png").write_bytes(b"png")
    keep = [_name("b.json", os.getpid()),                 # a live writer (this process)
            _name("c.json", dead, host="00000000"),       # another host's PID means nothing here
            f".a.json.{dead}.tmp", ".a.json.tmp", ".notes.tmp",  # not our pattern
            _name("d.json", dead).replace(".tmp", ".tmp.bak"),
            _name("e.json", 0), _name("f.json", 99999999)]  # never a real PID
    for name in keep:
        (tmp_path / name).write_bytes(b"user data")
    outside = tmp_path.parent / f"{tmp_path.name}-target"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep")
    (tmp_path / _name("g", dead)).symlink_to(outside)  # a symlink is never followed or removed
    keep.append(_name("g", dead))
    assert temp_files.sweep_stale(tmp_path) == sorted([stale_dir, stale_file])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)
    assert (outside / "precious").read_bytes() == b"keep"


def test_a_folder_is_swept_once_per_process(tmp_path):
    write_bytes_atomic(tmp_path / "first.json", b"{}")
    late = tmp_path / _name("late.json", _dead_pid())
    late.write_bytes(b"half")
    write_bytes_atomic(tmp_path / "second.json", b"{}")
    assert late.exists()  # a run writing many files lists the folder once
    assert temp_files.sweep_stale(tmp_path, again=True) == [late]


def test_fleet_outputs_and_bags_sweep_their_folder(tmp_path):
    from cuvil_perception.fleet.runner import write_outputs

    stale = tmp_path / "drives" / _name("drive_a", _dead_pid())
    stale.mkdir(parents=True)
    written = write_outputs(tmp_path / "drives" / "drive_a", {"out.jsonl": b"{}\n"})
    assert written == [str(Path("drives") / "drive_a" / "out.jsonl")]
    assert sorted(p.name for p in (tmp_path / "drives").iterdir()) == ["drive_a"]
    from cuvil_perception.drives.bag import write_bag

    drive = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive"
    stale = tmp_path / _name("a.mcap", _dead_pid())
    (stale / "a.mcap").mkdir(parents=True)
    write_bag(drive, tmp_path / "a.mcap", "mcap")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mcap", "drives"]
