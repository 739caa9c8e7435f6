"""Writing outputs so that a crash, a kill or a full disk never leaves garbage, and recognising
what this tool wrote before.

Three ways to write, each all-or-nothing at its own grain:

* ``LineWriter`` appends whole lines (JSONL): each line goes out in one ``write()`` loop; when a
  write fails (disk full, file-size limit, I/O error) the file is cut back to the end of the last
  whole line and ``OutputWriteError`` names the file. Every line is flushed to the kernel before
  the next frame, so kill -9 loses at most the line being written and never leaves half of one.
* ``write_bytes_atomic`` / ``write_text_atomic`` write a whole file through a temporary file in
  the same folder and a rename; on failure the temporary file is removed. The temporary name
  (``temp_files.temp_path``) says which host and process wrote it, so the first write into a
  folder removes what a killed run left there (``temp_files.sweep_stale``) and nothing else.
* ``mark_folder`` drops a ``.cuvil-output`` marker into a folder this tool fills (PNG folders,
  ``--viz``, ``--plot``, ``compile --out``).

"A previous output of this tool" (what the output-path policy lets a run replace without
``--overwrite``) is recognised by ``is_previous_output``, and what it holds by ``output_kind``
(a verb does not replace another kind of output without ``--overwrite``):

* a file that starts with our own header, as only this tool writes it: a JSONL run log whose
  first line opens with its fields in our order and compact form
  (``{"frame":N,"timestamp_ns":N,"stamps":{`` — kind ``detections``; a user's own JSONL with a
  ``"frame"`` key does not count), a JSON document whose first key is a
  ``"format": "cuvil-...`` tag (``record`` for run records, ``scores`` for eval's files, else
  ``document``), a trace whose first key is ``"otherData": {"producer": "cuvil-perception"``
  (``trace``), an MCAP file whose first record after the header is a Metadata record named
  ``cuvil-perception`` (``mcap``, the ``mcap`` sink), a page starting with ``HTML_SIGNATURE``
  (``report``, the fleet's ``report.html``);
* any file (e.g. an empty JSONL after a crash before frame 0, a CSV of a third-party sink)
  that the run record ``<file>.record.json`` beside it vouches for (``vouched_by_record``): the
  record lists the file among its outputs and holds, in ``output_files``, the identity of the
  very file the run wrote (device, inode, size and sha256 of its bytes, ``rt.written_files``).
  A file a user put at that path later is not ours even when it reuses the inode number: its
  bytes differ from a finished run's, and a killed run's file must start with the bytes its
  record last saw (or be empty, when it saw none). Kind ``detections`` for a ``jsonl`` sink's
  file, ``mcap`` for an ``mcap`` sink's, else ``run output``. A record without ``output_files``
  (format ``cuvil-run-record/1``, before it existed) vouches for nothing;
* a folder that is empty or holds the ``.cuvil-output`` marker (kind ``folder``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path

from .errors import OutputWriteError
from .temp_files import sweep_stale, temp_path

FOLDER_MARKER = ".cuvil-output"
TRACE_PRODUCER = "cuvil-perception"
HTML_SIGNATURE = "<!doctype html><!-- cuvil-perception -->"  # the first bytes of our pages
_RUN_LOG_HEAD = re.compile(rb'\{"frame":[0-9]+,"timestamp_ns":-?[0-9]+,"stamps":\{')
_FORMAT_HEAD = re.compile(rb'\{\n "format": "(cuvil-[a-z0-9-]+)/')
_FORMAT_KINDS = (("cuvil-run-record", "record"), ("cuvil-eval", "scores"))
_TRACE_HEAD = b'{"otherData": {"producer": "' + TRACE_PRODUCER.encode() + b'"'
SINK_KINDS = {"jsonl": "detections", "mcap": "mcap"}  # sink op -> the kind of its file


def describe_os_error(exc: OSError) -> str:
    """A short reason: 'no space left on device', 'file too large', 'read-only file system'."""
    return (exc.strerror or str(exc)).lower()


class LineWriter:
    """Append whole lines to a file opened (created or truncated) by the constructor.

    ``write_line(data)`` writes ``data`` (bytes ending in ``\\n``) completely or not at all: on a
    failed write the file is truncated back to its previous end and ``OutputWriteError`` says
    which file, why, and how many whole lines it keeps. ``fsync`` also syncs each line to disk.
    """

    def __init__(self, path: str | Path, fsync: bool = False):
        self.path = Path(path)
        self.fsync = fsync
        self.lines = 0
        self._end = 0  # byte offset after the last whole line
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write_line(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:  # os.write may write less than asked; finish the line before returning
                view = view[os.write(self._fd, view):]
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise OutputWriteError(self.path, f"writing line {self.lines + 1} failed "
                                   f"({describe_os_error(exc)}); the file keeps its "
                                   f"{self.lines} whole line(s)") from None
        self._end += len(data)
        self.lines += 1

    def _cut_back(self) -> None:
        """Remove a partly written line (a regular file only; a device has nothing to cut)."""
        try:
            os.ftruncate(self._fd, self._end)
            os.lseek(self._fd, self._end, os.SEEK_SET)
        except OSError:
            pass

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``path`` through a temporary file and a rename: readers see the old file or the new
    one, never half of one; on failure the temporary file is removed and ``OutputWriteError``
    names ``path``."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(path.parent)
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException as exc:  # a signal mid-write must not leave the temporary file either
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputWriteError(path, f"cannot write it ({describe_os_error(exc)})") from None
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``write_bytes_atomic`` of UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def mark_folder(folder: str | Path, verb: str, frame_dirs: tuple[str, ...] = (),
                files: tuple[str, ...] = ()) -> None:
    """Create ``folder`` and its ``.cuvil-output`` marker (which verb filled it). When the
    marker was already there (an earlier output of this tool), first remove what that output
    wrote and this one writes again: per-frame pictures ``NNNNNN.png`` in ``frame_dirs`` and
    the named ``files``, so a shorter rerun does not leave the earlier run's frames beside its
    own. Nothing else is touched (a folder without the marker is the user's: nothing at all)."""
    folder = Path(folder)
    marker = folder / FOLDER_MARKER
    if marker.is_file():
        for name in frame_dirs:
            sub = folder / name
            for path in sub.glob("[0-9][0-9][0-9][0-9][0-9][0-9].png") if sub.is_dir() else ():
                path.unlink()
        for name in files:
            if (folder / name).is_file():
                (folder / name).unlink()
    folder.mkdir(parents=True, exist_ok=True)
    if not marker.exists():
        write_text_atomic(marker, json.dumps({"format": "cuvil-output/1", "by": verb}) + "\n")


def is_previous_output(path: str | Path) -> bool:
    """True when ``path`` (an existing file or folder) is something this tool wrote (see the
    module docstring); a missing path is False."""
    return output_kind(path) is not None


def output_kind(path: str | Path) -> str | None:
    """What the output of ours at ``path`` holds (``detections``, ``record``, ``scores``,
    ``trace``, ``mcap``, ``report``, ``document``, ``run output``, ``folder``), or None when
    ``path`` is missing or not something this tool wrote."""
    path = Path(path)
    if path.is_dir():
        try:
            ours = (path / FOLDER_MARKER).is_file() or not any(path.iterdir())
        except OSError:
            return None
        return "folder" if ours else None
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(128)
    except OSError:
        return None
    return _kind_of_head(head) or ("mcap" if _our_mcap(path) else None) or \
        vouched_by_record(path)


def _kind_of_head(head: bytes) -> str | None:
    if _RUN_LOG_HEAD.match(head):
        return "detections"
    tagged = _FORMAT_HEAD.match(head)
    if tagged:
        tag = tagged.group(1).decode("ascii")
        return next((kind for prefix, kind in _FORMAT_KINDS if tag.startswith(prefix)),
                    "document")
    if head.startswith(_TRACE_HEAD):
        return "trace"
    if head.startswith(HTML_SIGNATURE.encode()):
        return "report"
    return None


MCAP_MAGIC = b"\x89MCAP0\r\n"
MCAP_METADATA_NAME = b"cuvil-perception"


def _our_mcap(path: Path) -> bool:
    """MCAP magic, a Header record, then a Metadata record (opcode 0x0C) whose name is
    ``cuvil-perception``: what the ``mcap`` sink writes first."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    if not head.startswith(MCAP_MAGIC) or len(head) < 17 or head[8] != 0x01:
        return False
    after_header = 17 + int.from_bytes(head[9:17], "little")
    record = head[after_header:after_header + 13 + len(MCAP_METADATA_NAME)]
    name = 4 + 9
    return len(record) == 13 + len(MCAP_METADATA_NAME) and record[0] == 0x0C and \
        int.from_bytes(record[9:13], "little") == len(MCAP_METADATA_NAME) and \
        record[name:] == MCAP_METADATA_NAME


def vouched_by_record(path: Path) -> str | None:
    """The kind of ``path`` when the run record beside it, ``<file>.record.json``, vouches for
    this very file: the record lists it among its outputs and, in ``output_files``, the file's
    identity as the run wrote it (``rt.written_files``), which the file still has: same device
    and inode, and the same bytes (a finished run's whole file; a killed run's file starts with
    the bytes it recorded, and is empty when it recorded none). The record of a run still going
    in this process vouches by name: its own outputs, which the output-path policy let it write.
    A record without the identity (format ``cuvil-run-record/1``) vouches for nothing."""
    sidecar = path.with_name(path.name + ".record.json")
    here = str(path.resolve())
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
        listed = {str(Path(o["path"]).resolve()): o.get("op") for o in record.get("outputs", [])}
        if here not in listed:
            return None
        ours = _own_running(record) or _same_file(path, record["output_files"][here])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return SINK_KINDS.get(listed[here], "run output") if ours else None


def _own_running(record: dict) -> bool:
    """The record of the run this process is running now (written at its start)."""
    run = record.get("run") or {}
    return record.get("status") == "running" and run.get("pid") == os.getpid() and \
        run.get("host") == platform.node()


def _same_file(path: Path, identity: dict) -> bool:
    """``path`` is the file ``identity`` describes (see ``rt.written_files``)."""
    size, want = int(identity["bytes"]), identity["sha256"]
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        if identity["dev"] is not None and (st.st_dev, st.st_ino) != (identity["dev"],
                                                                       identity["ino"]):
            return False
        if st.st_size < size or (identity["whole"] and st.st_size != size) or \
                (size == 0 and st.st_size != 0):
            return False
        digest = hashlib.sha256()
        while digest_left := size - handle.tell():
            chunk = handle.read(min(1 << 20, digest_left))
            if not chunk:
                return False
            digest.update(chunk)
    return digest.hexdigest() == want
