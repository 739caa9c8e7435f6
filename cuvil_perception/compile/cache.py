"""On-disk store of object code: ``get(key) -> bytes | None`` and ``put(key, bytes)``.

Layout: ``<cache_dir>/objects-v1/<key>.obj``, where ``cache_dir`` is read from
`cuvil_perception.config` at every call (so tests can point it elsewhere). Entry format::

    b"CUVILOBJ" | u32 format | u64 payload length | 32-byte sha256(payload) | u32 meta length
    | meta (JSON: kernel name, static params) | payload (ELF object)

Writes go to a temp file in the same directory and are published with ``os.replace`` (atomic on
POSIX), so readers never see a half-written entry and several processes compiling the same kernel
at once all succeed: each writes a complete, identical entry and the last rename wins. On load the
length and checksum are verified; a corrupt or truncated entry gives a `CacheCorruptionWarning`,
is removed and reported as a miss (the caller recompiles and rewrites it). Hits and misses are
appended (one byte each, ``O_APPEND``) to ``<cache_dir>/objects-v1/journal`` for ``cache info``.

Aliases ``<fast key>.alias`` (64 hex characters: an object key) let a warm start find an object
without rendering its IR (see `keys.fast_key`); they are written the same atomic way and a bad
or dangling alias is simply a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import warnings
from pathlib import Path

from .. import config

MAGIC = b"CUVILOBJ"
FORMAT = 1
_HEAD = struct.Struct("<8sIQ32sI")
_SUBDIR = f"objects-v{FORMAT}"
_SUFFIX = ".obj"
_ALIAS = ".alias"
_HEX64 = re.compile(rb"[0-9a-f]{64}")


class CacheCorruptionWarning(UserWarning):
    """A cache entry failed its integrity check and is being rebuilt."""


def store_dir() -> Path:
    """Directory holding the entries (may not exist yet)."""
    return config.cache_dir() / _SUBDIR


def entry_path(key: str) -> Path:
    return store_dir() / f"{key}{_SUFFIX}"


def get(key: str) -> bytes | None:
    """The object bytes stored under ``key``, or None (absent, unreadable or corrupt)."""
    path = entry_path(key)
    try:
        blob = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None  # absent (a bad cache dir is reported by `put`)
    except OSError as exc:
        warnings.warn(f"kernel cache: cannot read {path}: {exc}; recompiling",
                      CacheCorruptionWarning, stacklevel=2)
        return None
    payload, problem = decode(blob)
    if problem is not None:
        warnings.warn(f"kernel cache entry {path} is corrupt ({problem}); recompiling",
                      CacheCorruptionWarning, stacklevel=2)
        _unlink_quietly(path)
        return None
    _journal(b"h")
    return payload


def put(key: str, payload: bytes, meta: dict | None = None) -> Path:
    """Store ``payload`` under ``key`` atomically; returns the entry path."""
    path = _write_atomic(f"{key}{_SUFFIX}", encode(payload, meta or {}))
    _journal(b"m")
    return path


def get_alias(fast: str) -> str | None:
    """The object key an alias points to, or None (absent or malformed)."""
    try:
        text = (store_dir() / f"{fast}{_ALIAS}").read_bytes().strip()
    except OSError:
        return None
    return text.decode("ascii") if _HEX64.fullmatch(text) else None


def put_alias(fast: str, key: str) -> None:
    """Point alias ``fast`` at object key ``key`` (atomically)."""
    _write_atomic(f"{fast}{_ALIAS}", key.encode("ascii") + b"\n")


def _write_atomic(name: str, blob: bytes) -> Path:
    directory = store_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, directory / name)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise
    return directory / name


def encode(payload: bytes, meta: dict) -> bytes:
    meta_bytes = json.dumps(meta, sort_keys=True).encode("utf-8")
    head = _HEAD.pack(MAGIC, FORMAT, len(payload), hashlib.sha256(payload).digest(),
                      len(meta_bytes))
    return head + meta_bytes + payload


def decode(blob: bytes) -> tuple[bytes | None, str | None]:
    """(payload, None) for a valid entry, else (None, what is wrong)."""
    if len(blob) < _HEAD.size:
        return None, f"truncated header: {len(blob)} bytes"
    magic, fmt, length, digest, meta_len = _HEAD.unpack_from(blob)
    if magic != MAGIC or fmt != FORMAT:
        return None, "bad magic or format"
    start = _HEAD.size + meta_len
    if len(blob) != start + length:
        return None, f"length {len(blob) - start} != recorded {length}"
    payload = blob[start:]
    if hashlib.sha256(payload).digest() != digest:
        return None, "checksum mismatch"
    return payload, None


def read_meta(path: Path) -> dict:
    """The JSON metadata of an entry ({} if unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD.size)
            meta_len = _HEAD.unpack(head)[4]
            return json.loads(fh.read(meta_len))
    except (OSError, struct.error, ValueError):
        return {}


def cache_info() -> dict:
    """``dir``, ``entries``, ``bytes`` (all entries), ``hits`` and ``misses`` (ever recorded)."""
    directory = store_dir()
    entries = sorted(directory.glob(f"*{_SUFFIX}")) if directory.is_dir() else []
    size = sum(_size(p) for p in entries)
    try:
        journal = (directory / "journal").read_bytes()
    except OSError:
        journal = b""
    return {"dir": str(directory), "entries": len(entries), "bytes": size,
            "hits": journal.count(b"h"), "misses": journal.count(b"m")}


def cache_clear() -> int:
    """Delete every entry (and the journal and stray temp files); returns the entries removed."""
    directory = store_dir()
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.iterdir():
        if path.name.startswith(".tmp-") or path.name == "journal" or path.suffix == _ALIAS:
            _unlink_quietly(path)
        elif path.suffix == _SUFFIX:
            removed += _unlink_quietly(path)
    return removed


def _journal(mark: bytes) -> None:
    # One byte per event with O_APPEND: concurrent processes never interleave partial records.
    try:
        fd = os.open(store_dir() / "journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, mark)
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _unlink_quietly(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0
