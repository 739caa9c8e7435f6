"""Bad-input catalogue, signals: SIGTERM, SIGINT and kill -9 in the middle of a run.

Each row starts ``cuvil-perception run`` in a subprocess on a looping drive paced at its
recorded 10 Hz (so it never ends by itself), waits for two JSONL lines, sends the signal and
asserts: the exit code (143, 130, or killed), the run record's status (``terminated``,
``interrupted``, ``killed``: a "running" record whose process is gone), every JSONL line whole,
no temporary file, and that the record beside the output is this run's, not the stale record
of an earlier run on another drive that was there before.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.rt import record_status
from cuvil_perception.testing.interrupt import cli_argv

from ._runner import REPO, cli

PIPELINE = ("pipeline: signals\nstages:\n  - {id: drive, op: replay, params: {loop: true}}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")

ROWS = [  # signal, exit code, record status, stderr line
    (signal.SIGTERM, 143, "terminated", "terminated (SIGTERM): outputs and record hold"),
    (signal.SIGINT, 130, "interrupted", "interrupted (Ctrl-C): outputs and record hold"),
    (signal.SIGKILL, -9, "killed", None),
]


@pytest.fixture(scope="module")
def drives(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("signal-drives")
    make_drive(root / "old", 2, seed=1)
    make_drive(root / "new", 3, seed=2)
    return root / "old", root / "new"


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"run ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no {count} lines in {path} after {timeout} s")


@pytest.mark.parametrize("sig, code, status, line", ROWS, ids=[r[0].name for r in ROWS])
def test_signal_mid_run_leaves_whole_lines_and_a_record_that_says_so(tmp_path, drives, sig,
                                                                     code, status, line):
    old, new = drives
    (tmp_path / "p.yaml").write_text(PIPELINE)
    first = cli("run", str(tmp_path / "p.yaml"), "--replay", str(old), "--frames", "1",
                cwd=tmp_path)
    assert first.code == 0, first.stderr  # leaves a record of a run on the old drive
    out = tmp_path / "out.jsonl"
    # SIGINT armed in the child: a suite run in the background inherits it ignored
    proc = subprocess.Popen(cli_argv("run", "p.yaml", "--replay", str(new), "--rate", "1"),
                            cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _wait_for_lines(out, 2, proc)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr, stderr
    if line is not None:
        assert line in stderr, stderr
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) >= 3  # ends with a newline: no partial line
    assert [json.loads(x)["frame"] for x in lines[:-1]] == list(range(len(lines) - 1))
    record = json.loads((tmp_path / "out.jsonl.record.json").read_text())
    assert record_status(record) == status
    assert [d["path"] for d in record["drives"]] == [str(new.resolve())]  # not the stale one
    assert not list(tmp_path.glob(".*.tmp"))


def test_sigterm_before_the_first_frame_marks_the_record(tmp_path, drives):
    """SIGTERM while the run is still starting (a slow first read): exit 143, one line."""
    _, new = drives
    (tmp_path / "p.yaml").write_text(PIPELINE)
    code = ("import os, signal, sys\n"
            "from cuvil_perception.rt import run_files\n"
            "start = run_files.RecordFile.start\n"
            "def start_then_term(self):\n"
            "    start(self)\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "run_files.RecordFile.start = start_then_term\n"
            "from cuvil_perception.cli.app import main\n"
            "main(sys.argv[1:])\n")
    done = subprocess.run([sys.executable, "-c", code, "run", "p.yaml", "--replay", str(new)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 143, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "terminated (SIGTERM)" in lines[0], done.stderr
    record = json.loads((tmp_path / "out.jsonl.record.json").read_text())
    assert record["status"] == "terminated"
    assert REPO.is_dir()


INTERRUPTED_IMPORT = """\
import sys
class Interrupt:  # Ctrl-C landing while the verbs' modules load
    def find_spec(self, name, path=None, target=None):
        if name == "cuvil_perception.cli.app":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from cuvil_perception.cli import main
main(["--version"])
"""


def test_ctrl_c_while_the_cli_loads_is_one_line_exit_130():
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted (SIGINT): stopped before any frame was written"


def test_ctrl_c_in_make_drive_does_not_claim_nothing_was_written(tmp_path, monkeypatch):
    """A verb other than run may be half-way (a partial drive): the line says only that it was
    interrupted."""
    import cuvil_perception.drives.synth as synth

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(synth, "make_drive", interrupted)
    result = cli("make-drive", str(tmp_path / "d"), "--frames", "1")
    assert result.code == 130 and result.stderr.strip() == "interrupted (SIGINT)"
