"""An append-only list of small dicts kept in an anonymous temporary file, not in memory.

A run records one timing per stage per frame and one end-to-end entry per frame. Held as Python
dicts these cost ~0.7 KB each, so a long run's memory grew by 3-12 KB per frame (the soak in
``benchmarks/soak.py``). ``Spool`` packs each entry into a fixed-size binary record (int64
numbers, small-int codes for the few distinct strings) appended to a temporary file, so memory
stays flat however long a run goes; reading decodes dicts again. It is a read-only
``Sequence``: ``len``, indexing, slices (only the asked records are read) and iteration work as
on the list it replaces.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from collections.abc import Sequence

_ABSENT = -(2**63)  # an int field missing from an entry
_BUFFER = 256  # records kept in memory before one write


class Spool(Sequence):
    """Entries with the int fields ``ints`` and the text fields ``texts`` (str or None); a key
    missing from an entry reads back missing. Thread-safe."""

    def __init__(self, ints: tuple[str, ...], texts: tuple[str, ...] = ()):
        self.ints, self.texts = ints, texts
        self._format = struct.Struct("<" + "q" * len(ints) + "i" * len(texts))
        self._file = tempfile.TemporaryFile(prefix="cuvil-spool-")
        self._written = 0  # records in the file
        self._pending: list[bytes] = []
        self._codes: dict[str | None, int] = {}
        self._values: list[str | None] = []
        self._lock = threading.Lock()

    def append(self, entry: dict) -> None:
        unknown = set(entry) - set(self.ints) - set(self.texts)
        if unknown:
            raise KeyError(f"spool has no field(s) {sorted(unknown)}")
        with self._lock:
            numbers = [int(entry.get(name, _ABSENT)) for name in self.ints]
            codes = [self._code(entry[name]) if name in entry else -1 for name in self.texts]
            self._pending.append(self._format.pack(*numbers, *codes))
            if len(self._pending) >= _BUFFER:
                self._flush()

    def extend(self, entries) -> None:
        for entry in entries:
            self.append(entry)

    def _code(self, value: str | None) -> int:
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._values)
            self._values.append(value)
        return code

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            os.pwrite(self._file.fileno(), data, self._written * self._format.size)
            self._written += len(self._pending)
            self._pending.clear()

    def __len__(self) -> int:
        with self._lock:
            return self._written + len(self._pending)

    def __getitem__(self, index):
        with self._lock:
            self._flush()
            if isinstance(index, slice):
                start, stop, step = index.indices(self._written)
                if step != 1:
                    return [self._read(i, i + 1)[0] for i in range(start, stop, step)]
                return self._read(start, max(start, stop))
            if index < 0:
                index += self._written
            if not 0 <= index < self._written:
                raise IndexError("spool index out of range")
            return self._read(index, index + 1)[0]

    def __iter__(self):
        return iter(self[:])

    def _read(self, start: int, stop: int) -> list[dict]:
        size = self._format.size
        data = os.pread(self._file.fileno(), (stop - start) * size, start * size)
        entries, n = [], len(self.ints)
        for values in self._format.iter_unpack(data):
            entry = {name: v for name, v in zip(self.ints, values[:n]) if v != _ABSENT}
            for name, code in zip(self.texts, values[n:]):
                if code >= 0:
                    entry[name] = self._values[code]
            entries.append(entry)
        return entries
