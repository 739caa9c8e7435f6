"""Shared helpers of the bad-input catalogue (tests/badinput/test_*.py, one file per area).

Each catalogue row runs a verb the way a user would and asserts the project's promise for bad
input: exit code 2 (or the documented one), exactly one line on stderr that names what and where
(file, line, field), no traceback, and no file that existed before the run changed.

`cli` runs the verb in this process through click's runner (~10 ms, against ~1.5 s for a fresh
interpreter), so a catalogue of hundreds of rows stays fast; `cli_subprocess` is there for rows
that need a real process (signals, exit codes of the console script itself).
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    """What a user sees: exit code, stdout, stderr (and the uncaught exception, if any)."""

    code: int
    stdout: str
    stderr: str
    crash: str = ""  # the traceback of an exception that escaped the CLI (a bug)


def cli(*args: str, cwd: Path | None = None) -> Result:
    """Run ``cuvil-perception ARGS`` in-process (cwd changed for the call when given)."""
    from cuvil_perception.cli.app import cli as group

    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(group, list(args), prog_name="cuvil-perception",
                                    env={"COLUMNS": "200"})
    finally:
        os.chdir(previous)
    crash = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(result.exception))
    return Result(result.exit_code, result.stdout, result.stderr, crash)


def cli_subprocess(*args: str, cwd: Path = REPO, timeout: float = 300) -> Result:
    """Run ``python -m cuvil_perception ARGS`` in a fresh interpreter."""
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


_UNDER_FILE_LIMIT = """\
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
import cuvil_perception.testing.ops
from cuvil_perception.cli.app import main
main(sys.argv[1:])
"""


def cli_under_file_limit(cwd: Path, limit: int, *args: str) -> subprocess.CompletedProcess:
    """Run ``cuvil-perception ARGS`` in a fresh interpreter whose files may grow to ``limit``
    bytes (RLIMIT_FSIZE: what a full disk looks like to a writer; 0: no limit), with the test
    ops registered."""
    code = _UNDER_FILE_LIMIT.format(limit=limit if limit else resource.RLIM_INFINITY)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120)


def assert_one_line_error(result: Result, *fragments: str, code: int = 2) -> str:
    """Exit ``code``, one non-empty stderr line containing every fragment, no traceback."""
    assert not result.crash, result.crash
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == code, (result.code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def snapshot(*roots: Path) -> dict[Path, str]:
    """sha256 of every file under ``roots`` (to show a failed run changed nothing)."""
    digests = {}
    for root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def assert_unchanged(before: dict[Path, str]) -> None:
    """Every file of ``before`` still exists with the same bytes."""
    for path, digest in before.items():
        assert path.is_file(), f"{path} was removed"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was changed"


# A replay of a drive into a JSONL run log: the smallest pipeline whose output rules matter.
REPLAY_JSONL = ("pipeline: replay\nstages:\n  - {id: drive, op: replay}\n"
                "  - {id: out, op: jsonl, inputs: {points: drive/points}, "
                "params: {path: out.jsonl}}\n")


def replay_work(folder: Path, frames: int, seed: int) -> Path:
    """``folder`` with a synthetic ``drive`` (``frames`` frames) and ``p.yaml`` (REPLAY_JSONL)."""
    from cuvil_perception.drives.synth import make_drive

    make_drive(folder / "drive", frames, seed=seed)
    (folder / "p.yaml").write_text(REPLAY_JSONL)
    return folder
