"""Bad-input catalogue, the run record beside an output vouches for the very file the run wrote,
never for a file a user put at that path later (non-negotiable 4: never write over a file the
run did not make).

A run writes ``out.X`` and ``out.X.record.json``; the user deletes ``out.X`` and puts their own
file there (a new file, or the same inode number rewritten, as a file system reusing the inode
would give): the next run refuses it with exit 2 (``not-ours``) and leaves it unchanged, for a
``jsonl`` sink and an ``mcap`` sink. What the sidecar rule is for still works without
``--overwrite``: the empty JSONL of a run killed before frame 0, a file a killed run was still
appending to, a JSONL cut back by a full disk; an old record (``cuvil-run-record/1``, without
``output_files``) no longer vouches for a file that does not start with our own header.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.graph.yaml_loader import load_pipeline
from cuvil_perception.output_files import output_kind
from cuvil_perception.rt import run_files
from cuvil_perception.rt.options import RunOptions

from ._runner import assert_one_line_error, assert_unchanged, cli, cli_under_file_limit, snapshot

SINKS = {"out.jsonl": "jsonl", "out.mcap": "mcap"}
USERS = "frame,count\n0,12\n1,15\n"  # the user's own file: a CSV


def _pipeline(name: str) -> str:
    return ("pipeline: sidecar\nstages:\n  - {id: drive, op: replay}\n"
            f"  - {{id: out, op: {SINKS[name]}, inputs: {{points: drive/points}}, "
            f"params: {{path: {name}}}}}\n")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sidecar-drive") / "drive"
    make_drive(out, 3, seed=13)
    return out


def _run(work: Path, *args: str):
    return cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--frames", "2",
               *args, cwd=work)


def _replace(path: Path, same_inode: bool) -> None:
    """The user's file at ``path``: a new file, or the same inode number with other bytes."""
    inode = path.stat().st_ino
    if same_inode:
        with open(path, "r+b") as handle:
            handle.truncate(0)
            handle.write(USERS.encode())
        assert path.stat().st_ino == inode
    else:
        path.unlink()
        path.write_text(USERS)


@pytest.mark.parametrize("same_inode", [False, True], ids=["new-file", "same-inode"])
@pytest.mark.parametrize("name", sorted(SINKS))
def test_a_file_put_where_our_output_was_is_refused(tmp_path, source, name, same_inode):
    (tmp_path / "p.yaml").write_text(_pipeline(name))
    (tmp_path / "drive").symlink_to(source)
    assert _run(tmp_path).code == 0
    again = _run(tmp_path)  # the run's own output, untouched: replaced without --overwrite
    assert again.code == 0, again.stderr
    record = json.loads((tmp_path / f"{name}.record.json").read_text())
    assert record["format"] == "cuvil-run-record/2"
    assert record["output_files"][str((tmp_path / name).resolve())]["whole"] is True
    _replace(tmp_path / name, same_inode)
    before = snapshot(tmp_path / name, tmp_path / f"{name}.record.json")
    assert_one_line_error(_run(tmp_path), "rule 'not-ours'", name)
    assert_unchanged(before)
    assert (tmp_path / name).read_text() == USERS
    assert _run(tmp_path, "--overwrite").code == 0  # the way out stays


HEADLESS = ("pipeline: killed\nstages:\n  - {id: src, op: test.scripted, params: {frames: 2}}\n"
            "  - {id: out, op: jsonl, inputs: {v: src/value}, params: {path: out.jsonl}}\n")


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.fixture
def killed(tmp_path, monkeypatch):
    """A run's record as its process left it when killed: started, sink file opened and
    written, refreshed while frames went through, never finished; its pid is gone. The bytes
    written are not our JSONL header, so only the record can vouch for them (as for a
    third-party sink's file). Yields (the record file, a function writing bytes and
    refreshing the record, the output path)."""
    import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)

    (tmp_path / "p.yaml").write_text(HEADLESS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_files, "PROGRESS_INTERVAL_S", 0.0)
    pipeline = load_pipeline(tmp_path / "p.yaml")
    out = tmp_path / "out.jsonl"
    record = run_files.RecordFile(run_files.plan(pipeline, RunOptions()), pipeline, RunOptions())
    record.start()
    out.write_bytes(b"")  # what the sink's open leaves

    def write(data: bytes, refresh: bool = True) -> None:
        with open(out, "ab") as handle:
            handle.write(data)
        if refresh:
            record.progress(1)
        saved = json.loads(record.path.read_text())
        saved["run"]["pid"] = _dead_pid()
        record.path.write_text(json.dumps(saved, indent=1))

    write(b"", refresh=False)
    yield record.path, write, out


def test_the_empty_file_of_a_run_killed_before_frame_0_is_ours(killed):
    _, _, out = killed
    assert out.stat().st_size == 0 and output_kind(out) == "detections"
    out.write_text(USERS)  # the user's bytes in the same inode: not ours any more
    assert output_kind(out) is None


def test_a_killed_runs_file_is_ours_up_to_what_its_record_saw(killed):
    path, write, out = killed
    write(b"a,1\n")  # refresh 1: the record vouches for the bytes seen one refresh before
    write(b"b,2\n")  # refresh 2: the first 4 bytes
    write(b"c,3\n", refresh=False)  # written after the last refresh, then killed
    saved = json.loads(path.read_text())["output_files"][str(out.resolve())]
    assert saved["bytes"] == 4 and saved["whole"] is False
    assert output_kind(out) == "detections"
    with open(out, "r+b") as handle:  # cut back inside what the record did not see (a full
        handle.truncate(6)  # disk cutting off a partial line): still ours
    assert output_kind(out) == "detections"
    with open(out, "r+b") as handle:  # the same inode, other bytes: a user's file
        handle.write(b"X")
    assert output_kind(out) is None
    out.unlink()
    out.write_bytes(b"a,1\nb,2\nc,3\n")  # a new file with the same bytes
    assert output_kind(out) is None or out.stat().st_ino == saved["ino"]  # unless inode reused


def test_an_old_record_without_identities_vouches_only_for_our_header(tmp_path, source):
    (tmp_path / "p.yaml").write_text(_pipeline("out.jsonl"))
    (tmp_path / "drive").symlink_to(source)
    assert _run(tmp_path).code == 0
    sidecar = tmp_path / "out.jsonl.record.json"
    old = json.loads(sidecar.read_text())
    old["format"] = "cuvil-run-record/1"
    del old["output_files"]
    sidecar.write_text(json.dumps(old, indent=1))
    assert output_kind(tmp_path / "out.jsonl") == "detections"  # by its own header
    (tmp_path / "out.jsonl").write_text("")  # what a crash before frame 0 would leave
    assert output_kind(tmp_path / "out.jsonl") is None


BIG_LINES = ("pipeline: big\nstages:\n  - {id: src, op: test.scripted, params: {frames: 3, "
             "n: 4000}}\n  - {id: out, op: jsonl, inputs: {v: src/value}, "
             "params: {path: out.jsonl}}\n")


def test_a_jsonl_emptied_by_a_full_disk_is_replaced_without_overwrite(tmp_path):
    """A file-size limit below the first line (a full disk): the line is cut off, the file is
    empty, the run fails with exit 2; its record vouches for the empty file, so the rerun
    replaces it without --overwrite."""
    import cuvil_perception.testing.ops  # noqa: F401

    (tmp_path / "p.yaml").write_text(BIG_LINES)
    done = cli_under_file_limit(tmp_path, 9000, "run", "p.yaml")
    assert done.returncode == 2 and "writing line 1 failed" in done.stderr, done.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == b""
    assert output_kind(tmp_path / "out.jsonl") == "detections"
    rerun = cli("run", str(tmp_path / "p.yaml"), cwd=tmp_path)
    assert rerun.code == 0, rerun.stderr
    assert (tmp_path / "out.jsonl").read_bytes().count(b"\n") == 3
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY
