"""Content digests of source files, each file hashed at most once per process and, across
processes, only when it changed.

The cache keys depend on source text (`keys.fast_key` hashes the package and the generator's
folder; `lang.kernel` hashes a kernel's module and the modules its helpers come from). Both ask
here, so a file they share is read once. A digest is of the file's bytes (sha256). Files edited
while the process runs are not seen again (the digests are memoised): a kernel is re-keyed in
the next process, which is when its IR could first differ anyway (modules are not re-imported).

Reading and hashing the package (~250 files, 1.3 MB) costs 5-15 ms in a fresh process, most of
a warm start (`benchmarks/warm_start.py`). So digests are also kept in an index in the cache
folder (`cache.DIGESTS`, as trusted as the objects beside it), each under the file's path with its
device, inode, size, mtime and ctime, as git's index does: a file whose ``stat`` still shows all
five is not read again (~2 us a file against ~40). The ctime cannot be set from user space
(``os.utime`` and every write set it to the current time), so an edit -- even one that keeps
the size and puts the old mtime back -- changes it. An edit within the file system's time
stamp granularity of the moment its digest was recorded could keep all five; so a digest is
only recorded for a file whose ctime is at least `RACY_NS` older than the moment of recording
(git's "racily clean" rule): a file edited since then has a ctime after that moment.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import sys
import time


#: a file changed less than this long ago (ns) is hashed but not recorded in the index.
RACY_NS = 2_000_000_000
_MAGIC = b"cuvil source digests 1\n"
_ROW = struct.Struct("<QQqqq32s")
_index: dict | None = None  # path -> (dev, ino, size, mtime_ns, ctime_ns, digest), or the
_rows = b""                 # number of its still packed row in `_rows` (as read: `_decode`)
_dirty = False


@functools.lru_cache(maxsize=None)
def file_digest(path: str) -> bytes:
    """sha256 of the bytes of the file at ``path`` (a resolved path, so aliases share it)."""
    global _dirty
    index = _load_index()
    try:
        info = os.stat(path)
    except OSError:
        info = None
    stamp = None if info is None else (info.st_dev, info.st_ino, info.st_size,
                                       info.st_mtime_ns, info.st_ctime_ns)
    known = index.get(path)
    if type(known) is int:
        known = _ROW.unpack_from(_rows, known * _ROW.size)
    if stamp is not None and known is not None and known[:5] == stamp:
        return known[5]
    with open(path, "rb", buffering=0) as fh:
        digest = hashlib.sha256(fh.readall()).digest()
    if stamp is not None and stamp[4] < time.time_ns() - RACY_NS:
        index[path] = (*stamp, digest)
        _dirty = True
    elif known is not None:
        del index[path]
        _dirty = True
    return digest


@functools.lru_cache(maxsize=None)
def tree_digest(directory: str, recursive: bool = True) -> str:
    """Hash of every ``.py`` file under ``directory`` (path relative to it + content digest),
    skipping ``__pycache__`` and hidden folders (``.venv``, ``.git``); 32 hex characters.
    ``recursive=False``: only the files directly in it."""
    files: list[tuple[str, str]] = []
    _walk(directory, "", files, recursive)
    h = hashlib.sha256()
    for rel, path in sorted(files):
        h.update(rel.encode("utf-8"))
        h.update(file_digest(path))
    save_index()
    return h.hexdigest()[:32]


def _walk(directory: str, rel: str, out: list[tuple[str, str]], recursive: bool = True) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:  # vanished or unreadable: it cannot be imported from either
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if recursive and entry.name != "__pycache__" and not entry.name.startswith("."):
                _walk(entry.path, f"{rel}{entry.name}/", out)
        elif entry.name.endswith(".py") and entry.is_file():
            out.append((rel + entry.name, entry.path))


def _load_index() -> dict:
    """The index read from the cache folder once per process (empty when there is none, it is
    not the user's alone, not valid, or the disk cache is off). Read and written without the
    cache folder's checks and warnings (`cache_trust`), which stay with the objects' first
    access: a file that is not the user's alone is ignored, a folder that is not is not
    written; the worst a forged index could do is name a stale alias, not load code."""
    global _index
    if _index is None:
        from .cache_trust import read_entry

        _index = {}
        path = _index_path()
        if path is not None:
            try:
                _index = _decode(read_entry(path)[0] or b"")
            except (OSError, ValueError, struct.error):
                _index = {}
    return _index


def _index_path():
    from .. import config
    from .cache import DIGESTS, SUBDIR

    return None if config.disk_cache_disabled() else config.cache_dir() / SUBDIR / DIGESTS


def _decode(blob: bytes) -> dict:
    """{path: row number} from `_encode`'s bytes (a magic line, a count, fixed records, then
    the paths separated by NUL), the records kept packed in `_rows` until a path is asked for:
    a binary format, and lazy, because an index holds every file ever hashed with this cache
    folder (~850 here): JSON took ~3 ms to parse, unpacking every record ~0.5-1.4 ms, this
    ~0.1 ms."""
    global _rows
    if not blob.startswith(_MAGIC):
        return {}
    count = int.from_bytes(blob[len(_MAGIC):len(_MAGIC) + 4], "little")
    start = len(_MAGIC) + 4
    end = start + count * _ROW.size
    paths = os.fsdecode(blob[end:]).split("\0")
    if len(paths) != count or len(blob) < end:
        return {}
    _rows = blob[start:end]
    return dict(zip(paths, range(count)))


def _encode(index: dict) -> bytes:
    paths = list(index)
    size = _ROW.size
    rows = (_ROW.pack(*row) if type(row) is tuple else _rows[row * size:(row + 1) * size]
            for row in index.values())
    return b"".join([_MAGIC, len(paths).to_bytes(4, "little"), *rows,
                     b"\0".join(os.fsencode(p) for p in paths)])


def save_index() -> None:
    """Write the index back if a digest was recorded or dropped, atomically, into a store
    folder that exists and is the user's alone (a failure costs the next process the reading,
    nothing else)."""
    global _dirty
    path = _index_path() if _dirty else None
    _dirty = False
    if path is not None:
        from .cache_trust import write_private

        write_private(path, _encode(_index))


def forget() -> None:
    """Drop the memoised digests and the index read (tests that edit sources and re-key in the
    same process)."""
    global _index, _dirty
    file_digest.cache_clear()
    tree_digest.cache_clear()
    _index, _dirty = None, False


_SYSTEM = tuple(os.path.realpath(p) + os.sep
                for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


def source_file(obj, anywhere: bool = False) -> str | None:
    """The resolved source file of a function or module, or None (no file, or, unless
    ``anywhere``, one inside the Python installation / site-packages)."""
    code = getattr(obj, "__code__", None)
    name = code.co_filename if code is not None else getattr(obj, "__file__", None)
    if not name or not name.endswith(".py"):
        return None
    if anywhere:
        path = os.path.realpath(name)
        return path if os.path.isfile(path) else None
    return resolved_source(name)


@functools.lru_cache(maxsize=None)
def resolved_source(name: str) -> str | None:
    path = os.path.realpath(name)
    if path.startswith(_SYSTEM) or f"{os.sep}site-packages{os.sep}" in path \
            or not os.path.isfile(path):
        return None
    return path
