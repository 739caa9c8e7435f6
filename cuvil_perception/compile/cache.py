"""On-disk store of object code: ``get(key) -> bytes | None`` and ``put(key, bytes)``.

Layout: ``<cache_dir>/objects-v2/<key>.obj``, where ``cache_dir`` is read from
`cuvil_perception.config` at every call (so tests can point it elsewhere). Entry format::

    b"CUVILOBJ" | u32 format | u64 payload length | 32-byte sha256(payload) | u32 meta length
    | meta (JSON: its own key, kernel name, static params) | payload (ELF object)

An entry names its key, and `get` checks that name (and, when the caller passes them, the kernel
name and static params it expects): an entry copied or moved onto another key's file is a miss
with a `CacheCorruptionWarning` and is recompiled, never loaded as the wrong kernel. Something
that is not a regular file at an entry's path (a directory, a socket) is removed, so the
rewrite after the recompilation succeeds instead of failing on every run.

The folders are created with mode 0700 whatever the umask (they hold code that gets loaded
into the process); entries are written 0600. Every open checks trust first (`cache_trust`): a
folder of this user's that is group- or world-writable is tightened to 0700, one owned by
someone else is not used (exit 2 when named by ``CUVIL_CACHE_DIR``, else a private cache), and
an entry is read without following links or blocking, only when it is a regular file of this
user's that others cannot write; another is removed with a warning and recompiled.

Writes go to a temp file in the same directory and are published with ``os.replace`` (atomic on
POSIX), so readers never see a half-written entry and several processes compiling the same kernel
at once all succeed: each writes a complete, identical entry and the last rename wins. On load the
length and checksum are verified; a corrupt or truncated entry gives a `CacheCorruptionWarning`,
is removed and reported as a miss (the caller recompiles and rewrites it). Hits and misses are
appended (one byte each, ``O_APPEND``) to ``<cache_dir>/objects-v1/journal`` for ``cache info``.

Aliases ``<fast key>.alias`` (``<fast key> <object key>``, 64 hex characters each) let a warm
start find an object without rendering its IR (see `keys.fast_key`); they are written the same
atomic way; an alias that does not name its own fast key (copied or swapped), is malformed or
dangles is a miss.

Temp files are named by `temp_files` (``.NAME.cuvil-HOST-PID-RANDOM.tmp``): the first write of a
process into the store removes those of writers that were killed mid-write (``kill -9``), never
a live writer's; ``cache clear`` does the same and also removes the ``.tmp-*.part`` temp files
that earlier versions wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import warnings
from pathlib import Path

from ..temp_files import sweep_stale, temp_path
from .cache_trust import read_entry, store_root

MAGIC = b"CUVILOBJ"
FORMAT = 2  # 2: the meta names the entry's key; aliases name their own key
_HEAD = struct.Struct("<8sIQ32sI")
SUBDIR = f"objects-v{FORMAT}"
_SUFFIX = ".obj"
_ALIAS = ".alias"
_ALIAS_LINE = re.compile(rb"([0-9a-f]{64}) ([0-9a-f]{64})")
_DIR_MODE = 0o700
DIGESTS = "digests"  # `source_digests`' index of source-file digests, kept beside the entries
HOST = "host"  # `host_record`'s record of the host CPU, kept there too


class CacheCorruptionWarning(UserWarning):
    """A cache entry failed its integrity check and is being rebuilt."""


def store_dir() -> Path:
    """Directory holding the entries (may not exist yet): in the configured cache folder, once
    `cache_trust.store_root` has checked (and if need be tightened) it."""
    return store_root(SUBDIR) / SUBDIR


def entry_path(key: str) -> Path:
    return store_dir() / f"{key}{_SUFFIX}"


def get(key: str, expect: dict | None = None, store: Path | None = None) -> bytes | None:
    """The object bytes stored under ``key``, or None (absent, unreadable, corrupt or foreign).

    ``expect``: meta fields the entry must carry (e.g. ``{"name": ..., "static": ...}``); the
    entry's own ``key`` field is always checked. ``store``: `store_dir()`, when the caller
    has just had it checked (one lookup's alias and entry share a check: ~0.1 ms less each).
    """
    store = store or store_dir()
    path = store / f"{key}{_SUFFIX}"
    blob, problem = read_entry(path)
    if blob is None:
        if problem is not None:  # else absent (a bad cache dir is reported by `put`)
            _reject(path, problem)
        return None
    payload, problem = decode(blob)
    meta = _meta_of(blob)
    if problem is None and meta.get("key") != key:
        problem = (f"it holds the object of key {str(meta.get('key'))[:12]}..., not of its "
                   f"file name's key {key[:12]}... (copied or swapped)")
    if problem is not None:
        _reject(path, f"is corrupt: {problem}")
        return None
    for field, want in (expect or {}).items():
        if meta.get(field) != want:  # a valid entry, reached through a wrong alias: keep it
            warnings.warn(f"kernel cache entry {path} is for {field} {meta.get(field)!r}, not "
                          f"{want!r} (a wrong alias); recompiling", CacheCorruptionWarning,
                          stacklevel=2)
            return None
    _journal(b"h", store)
    return payload


def _reject(path: Path, problem: str) -> None:
    """Warn, remove whatever is at ``path`` (file, link or folder) so the rewrite can succeed."""
    warnings.warn(f"kernel cache entry {path} {problem}; recompiling",
                  CacheCorruptionWarning, stacklevel=3)
    _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink_quietly(path)


def put(key: str, payload: bytes, meta: dict | None = None) -> Path:
    """Store ``payload`` under ``key`` atomically; returns the entry path."""
    path = write_atomic(f"{key}{_SUFFIX}", encode(payload, {**(meta or {}), "key": key}))
    _journal(b"m", path.parent)
    return path


def get_alias(fast: str, store: Path | None = None) -> str | None:
    """The object key an alias points to, or None (absent, malformed, or another key's alias).
    ``store``: as for `get`."""
    path = (store or store_dir()) / f"{fast}{_ALIAS}"
    blob, problem = read_entry(path)
    if blob is None:
        if problem is not None:  # not a file of ours (a folder, a FIFO, a link, someone
            _remove(path)        # else's): a quiet miss, cleared for the rewrite
        return None
    match = _ALIAS_LINE.fullmatch(blob.strip())
    if match is None or match.group(1).decode("ascii") != fast:
        return None
    return match.group(2).decode("ascii")


def put_alias(fast: str, key: str) -> None:
    """Point alias ``fast`` at object key ``key`` (atomically)."""
    write_atomic(f"{fast}{_ALIAS}", f"{fast} {key}\n".encode("ascii"))


def write_atomic(name: str, blob: bytes) -> Path:
    """Write ``name`` in the store through a `temp_files` name (mode 0600, created exclusively)
    and a rename; the first write of a process removes a killed writer's leftovers."""
    directory = ensure_private_dir()
    sweep_stale(directory)
    tmp = temp_path(directory / name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, directory / name)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return directory / name


def ensure_private_dir() -> Path:
    """Create the store folder (and the cache folder above it) mode 0700 (an existing one was
    checked and tightened by `store_dir`). Returns the store folder."""
    directory = store_dir()
    for folder in (directory.parent, directory):
        folder.parent.mkdir(parents=True, exist_ok=True)  # e.g. ~/.cache: the usual mode
        try:
            folder.mkdir(mode=_DIR_MODE)  # the umask can only remove bits from 0700
        except FileExistsError:
            pass
    return directory


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
    blob, _ = read_entry(path)
    return _meta_of(blob) if blob is not None else {}


def _meta_of(blob: bytes) -> dict:
    try:
        meta_len = _HEAD.unpack_from(blob)[4]
        meta = json.loads(blob[_HEAD.size:_HEAD.size + meta_len])
    except (struct.error, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def cache_info() -> dict:
    """``dir``, ``entries``, ``bytes`` (all entries), ``hits`` and ``misses`` (ever recorded)."""
    directory = store_dir()
    entries = sorted(directory.glob(f"*{_SUFFIX}")) if directory.is_dir() else []
    size = sum(_size(p) for p in entries)
    journal = read_entry(directory / "journal")[0] or b""
    return {"dir": str(directory), "entries": len(entries), "bytes": size,
            "hits": journal.count(b"h"), "misses": journal.count(b"m")}


def cache_clear() -> int:
    """Delete every entry, the journal, aliases, the source digests and the host record, the
    temp files of writers that are gone (`temp_files.sweep_stale`; a live writer's is kept) and
    the ``.tmp-*.part`` temp files of earlier versions; returns the entries removed."""
    directory = store_dir()
    if not directory.is_dir():
        return 0
    sweep_stale(directory, again=True)
    removed = 0
    for path in directory.iterdir():
        old_temp = path.name.startswith(".tmp-") and path.name.endswith(".part")
        if old_temp or path.name in ("journal", DIGESTS, HOST) or path.suffix == _ALIAS:
            _unlink_quietly(path)
        elif path.suffix == _SUFFIX:
            removed += _unlink_quietly(path)
    return removed


def _journal(mark: bytes, store: Path) -> None:
    # One byte per event with O_APPEND: concurrent processes never interleave partial records.
    try:
        fd = os.open(store / "journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)  # a FIFO there must not block
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
