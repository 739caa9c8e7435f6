"""The fleet's results file: one JSON line per finished drive, appended as each finishes.

``OUT/results.jsonl``::

    {"format": "cuvil-fleet-results/1", "mode": "eval", "pipeline": ..., "created": ...}
    {"drive": "/abs/drive_0003", "name": "drive_0003", "fingerprint": "...", "pipeline_hash":
     "...", "status": "ok", "attempts": [...], "where": {...}, "frames": 3, ...}
    ...

Each row is written with one ``write`` of a whole line, flushed and fsynced before the next
drive is recorded, so an interrupted fleet (Ctrl-C, a killed driver, a lost machine) leaves a
file whose complete lines are all valid. A torn last line (the driver killed mid-write) is
dropped when the file is resumed.

Rows are read as the report reads them (`report.row_problem`): a hand-edited row that the
report could not use is a usage error naming its line. ``--resume`` keeps the ``ok`` rows whose
(drive path, fingerprint, pipeline hash) match a drive of this fleet and runs the rest; failed
rows are run again. Without ``--resume`` an existing results file is an error: the fleet never
writes over a file it did not make.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..errors import OutputWriteError, UsageError
from ..output_files import describe_os_error

FORMAT = "cuvil-fleet-results/1"
RESULTS_NAME = "results.jsonl"


def row_key(row: dict) -> tuple[str, str, str]:
    return row["drive"], row["fingerprint"], row["pipeline_hash"]


class ResultsFile:
    """Append-only writer of a results file (see the module docstring)."""

    def __init__(self, path: Path, header: dict, resume: bool):
        self.path = Path(path)
        self._failed = False  # a row could not be written (close() then says nothing more)
        self._new = not self.path.exists()
        self._lines = 0  # lines this object wrote (the header included)
        self.previous: list[dict] = []
        if self.path.exists():
            if not resume:
                raise UsageError(f"{self.path}: a fleet results file is already there (pass "
                                 "--resume to continue that fleet, or another --out)")
            self.previous = _read(self.path, truncate_torn=True)
            self._file = open(self.path, "a", encoding="utf-8")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "x", encoding="utf-8")
            self.append(dict(header, format=FORMAT,
                             created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))

    def finished(self) -> dict[tuple[str, str, str], dict]:
        """The last ``ok`` row of every key, from the file as it was before this run."""
        return {row_key(r): r for r in self.previous if r.get("status") == "ok"}

    def append(self, row: dict) -> None:
        try:
            self._file.write(json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            self._lines += 1
        except OSError as exc:  # disk full: one line naming the file, not a traceback
            self._failed = True
            raise OutputWriteError(self.path, f"writing a row failed ({describe_os_error(exc)})"
                                   "; --resume continues from the whole rows before it") from None

    def discard_if_empty(self) -> None:
        """Remove the file when this object made it and wrote no drive row (a fleet stopped by
        a usage error before its first drive leaves nothing that would need --resume)."""
        if self._new and self._lines <= 1:
            self.path.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            self._file.close()
        except OSError as exc:  # the unwritten row again, after append() said so
            if not self._failed:
                raise OutputWriteError(self.path, f"cannot finish it "
                                       f"({describe_os_error(exc)})") from None


def read_results(path: str | Path) -> list[dict]:
    """The drive rows of a results file (the header checked, a torn last line ignored)."""
    return _read(Path(path), truncate_torn=False)


def _row_problem(row: dict) -> str | None:
    from .report import row_problem  # the report's own reading of a row (it imports eval/rt)

    return row_problem(row)


def _read(path: Path, truncate_torn: bool) -> list[dict]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the results file ({exc.strerror or exc})") \
            from None
    complete = data[:data.rfind(b"\n") + 1]
    rows = []
    for number, line in enumerate(complete.decode("utf-8", "replace").splitlines(), start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a results line ({exc.msg})") from None
        if number == 1:
            if not isinstance(row, dict) or row.get("format") != FORMAT:
                raise UsageError(f"{path}:1: not a fleet results file (expected format "
                                 f"{FORMAT!r})")
            continue
        if not isinstance(row, dict) or not {"drive", "fingerprint", "pipeline_hash",
                                             "status"} <= set(row):
            raise UsageError(f"{path}:{number}: not a drive row")
        problem = _row_problem(row)
        if problem is not None:
            raise UsageError(f"{path}:{number}: drive row {str(row.get('name'))[:60]!r} is not "
                             f"what a fleet writes ({problem[:120]}); delete that line and "
                             "--resume runs the drive again")
        rows.append(row)
    if not complete:
        raise UsageError(f"{path}: empty, not a fleet results file")
    if truncate_torn and len(complete) < len(data):
        with open(path, "r+b") as handle:  # our own file: drop the torn line before appending
            handle.truncate(len(complete))
    return rows
