"""What a run has written into each of its sink files, for the run record's ``output_files``:
the identity by which the record beside a file vouches for that very file, and for no file a
user put at the same path later (``output_files.vouched_by_record``).

One entry per sink file (folders excluded), keyed by the resolved path::

    {"dev": int or null, "ino": int or null, "bytes": int, "sha256": hex, "whole": bool}

``dev``/``ino``: the file's device and inode (null while it does not exist yet); ``sha256``: the
digest of its first ``bytes`` bytes. ``whole`` false (written at the start and while frames go
through): the file may have grown since, so the record vouches for a file on that device and
inode that *starts* with those bytes, and for an empty one when ``bytes`` is 0. ``whole`` true
(written when the run ended, after the sinks closed): exactly that size and digest.

The run's sinks truncate their files when they open and then only append, so the bytes once
written never change. While the run goes, ``bytes`` is the size seen at the refresh *before*
(about a second earlier, ``run_files.PROGRESS_INTERVAL_S``; at most ``_REFRESH_BYTES`` beyond
the last one): a line being written at a refresh and then cut off because the disk is full
(``output_files.LineWriter``) is never inside the vouched prefix. Only regular files are read
(a device or a pipe given as a sink path gets the entry of a missing file). A file replaced by
a user has another inode or, when the file system reuses the inode number, other bytes (or it
is empty, and replacing it loses nothing).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

_READ = 1 << 20  # bytes per read when hashing
# At most this many new bytes hashed per refresh (about a second): the refresh runs on the
# scheduler thread, and 2 MiB is ~5 ms at the 420 MB/s hashlib's sha256 measured on an AMD EPYC
# (Zen 4, SHA-NI; loaded machine). A faster writer's vouched prefix lags further behind (still
# a prefix); the rest is hashed when the run ends.
_REFRESH_BYTES = 2 << 20


class _Tracked:
    """The incremental digest of one file: ``hasher`` holds its first ``hashed`` bytes."""

    def __init__(self, path: Path):
        self.path = path
        self.dev = self.ino = None
        self.hasher, self.hashed, self.seen = hashlib.sha256(), 0, 0

    def entry(self, upto: int | None) -> dict:
        """Hash up to ``upto`` bytes (None: the whole file) and return the record entry."""
        try:
            if not stat.S_ISREG(os.stat(self.path).st_mode):  # never open a pipe to read it
                raise FileNotFoundError(self.path)
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                if (st.st_dev, st.st_ino) != (self.dev, self.ino) or st.st_size < self.hashed:
                    self.dev, self.ino = st.st_dev, st.st_ino  # replaced or cut: start over
                    self.hasher, self.hashed = hashlib.sha256(), 0
                end = st.st_size if upto is None else min(upto, st.st_size)
                handle.seek(self.hashed)
                while self.hashed < end:
                    chunk = handle.read(min(_READ, end - self.hashed))
                    if not chunk:
                        break
                    self.hasher.update(chunk)
                    self.hashed += len(chunk)
                self.seen = st.st_size
        except FileNotFoundError:
            self.dev = self.ino = None
            self.hasher, self.hashed, self.seen = hashlib.sha256(), 0, 0
        return {"dev": self.dev, "ino": self.ino, "bytes": self.hashed,
                "sha256": self.hasher.hexdigest(), "whole": upto is None}


class WrittenFiles:
    """The ``output_files`` of a run whose sinks write ``paths`` (files, not folders)."""

    def __init__(self, paths: list[Path]):
        self.files = {str(Path(p).resolve()): _Tracked(Path(p).resolve()) for p in paths}

    def at_start(self) -> dict[str, dict]:
        """Before any sink opens: the files are about to be rewritten from byte 0, so only
        an empty file at the same inode (or, for a file not there yet, at the path) is ours."""
        found = {key: tracked.entry(0) for key, tracked in self.files.items()}
        for tracked in self.files.values():
            tracked.seen = 0  # what is there now is the file being replaced, not this run's
        return found

    def refresh(self) -> dict[str, dict]:
        """While frames go through: the prefix seen at the previous refresh (at most
        ``_REFRESH_BYTES`` more than the last one)."""
        return {key: tracked.entry(min(tracked.seen, tracked.hashed + _REFRESH_BYTES))
                for key, tracked in self.files.items()}

    def whole(self) -> dict[str, dict]:
        """After the sinks closed: the whole files."""
        return {key: tracked.entry(None) for key, tracked in self.files.items()}
