"""Which kernel-cache folders and entries may be loaded from: this user's alone (as ssh and pip).

An entry is native code that gets loaded into the process, so whoever can write the cache can
run code as the user. Every lookup in the store (`store_root`; the lookups of the kernels a
warm start loads together share one) checks, with two ``stat`` calls:

* each cache folder (the cache folder and its ``objects-vN`` store) that exists is a directory
  owned by this user (effective uid). One that is ours but group- or world-writable is
  tightened to 0700 right there (on every open, not only on a write); on a read-only file
  system, where nobody can write it, it is used as it is.
* a folder owned by someone else (or ours and impossible to tighten) is not used. When the user
  named it (``CUVIL_CACHE_DIR``) that is a `CacheTrustError` (exit 2) naming the path and the
  fix; the default folder gives one warning line naming the path and the fix, and the process
  uses a private folder instead (``mkdtemp``: 0700, this user's, removed at exit).

Every entry (object, alias, journal) is read by `read_entry`: opened with ``O_NOFOLLOW`` (a
symbolic link is refused) and ``O_NONBLOCK`` (a FIFO or a device does not block the open), then
``fstat``-ed on that very descriptor: it must be a regular file, owned by this user and not
writable by group or others, or it is not read. An entry that passes was written by this user:
whatever happened to the folders above it, no one else's bytes are loaded.
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path

from .. import config
from ..errors import CacheTrustError
from ..temp_files import temp_path

_LOOSE = stat.S_IWGRP | stat.S_IWOTH
_private: dict[str, Path] = {}  # untrusted default cache folder -> this process's private one


class CacheTrustWarning(UserWarning):
    """The default cache folder is not this user's alone; a private one is used instead."""


def store_root(subdir: str) -> Path:
    """The cache folder to use (checked and tightened as the module docstring says); its
    ``subdir`` is the store. Raises `CacheTrustError` for an untrusted folder the user named."""
    root = config.cache_dir()
    private = _private.get(str(root))
    if private is not None:
        return private
    for folder in (root, root / subdir):
        problem = _folder_problem(folder)
        if problem is not None:
            return _untrusted(root, folder, problem)
    return root


def _folder_problem(folder: Path) -> str | None:
    """Why ``folder`` may not be loaded from, or None (absent, or ours and private now)."""
    try:
        info = os.stat(folder)
    except OSError:
        return None  # absent or unreachable: reads miss, the first write reports it
    if not stat.S_ISDIR(info.st_mode):
        return None  # a file in the folder's place: nothing can be read, writes report it
    uid = os.geteuid()
    if info.st_uid != uid:
        return (f"is owned by uid {info.st_uid}, not by you (uid {uid}): anyone who can write "
                "it could make this process run their native code")
    if info.st_mode & _LOOSE:
        try:
            os.chmod(folder, 0o700)
        except OSError as exc:
            if exc.errno != errno.EROFS:  # read-only: nobody can write it, nothing to tighten
                return f"is writable by others (mode {stat.S_IMODE(info.st_mode):o}) and " \
                       f"cannot be tightened ({exc.strerror})"
    return None


def _untrusted(root: Path, folder: Path, problem: str) -> Path:
    fix = "use a folder of your own (chown it to you, chmod 700) or point CUVIL_CACHE_DIR at one"
    if config.cache_dir_named():
        raise CacheTrustError(f"kernel cache folder {folder} (CUVIL_CACHE_DIR) {problem}; "
                              f"not loaded from: {fix}")
    private = Path(tempfile.mkdtemp(prefix="cuvil-kernel-cache-"))
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    _private[str(root)] = private
    warnings.warn(f"kernel cache folder {folder} {problem}; not loaded from: {fix}. This run "
                  f"uses a private cache instead ({private}; its kernels are compiled anew)",
                  CacheTrustWarning, stacklevel=4)
    return private


def read_entry(path: Path) -> tuple[bytes | None, str | None]:
    """(bytes, None) for a trusted entry; (None, None) when absent; else (None, what is wrong,
    phrased to follow "kernel cache entry PATH"). Never follows a link, never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "is a symbolic link (entries are never followed); not loaded"
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        info = os.fstat(fd)
        problem = _entry_problem(info)
        if problem is not None:
            return None, problem
        return _read_all(fd, info.st_size), None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    """The bytes from ``fd`` to its end (``size``: the expected length; a file that grew is
    read on to its end). ``os.read``: ~15 us less than a file object, for the few small files
    a warm start reads."""
    parts = [os.read(fd, size + 1)]
    while parts[-1]:
        parts.append(os.read(fd, 1 << 16))
    return b"".join(parts)


def write_private(path: Path, blob: bytes) -> bool:
    """Write ``blob`` to ``path`` atomically (a `temp_files` name, 0600, then a rename) if its
    folder exists and is this user's alone; False when it was not written (no such folder, not
    private, an OS error). For the records kept beside the entries (`source_digests`,
    `host_record`), which a failed write only costs time."""
    try:
        info = os.stat(path.parent)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
                or info.st_mode & _LOOSE:
            return False
        tmp = temp_path(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def _entry_problem(info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return f"cannot be read: it is {_kind(info.st_mode)}, not a regular file"
    uid = os.geteuid()
    if info.st_uid != uid:
        return (f"is owned by uid {info.st_uid}, not by you (uid {uid}); not loaded (it could "
                "be anyone's native code)")
    if info.st_mode & _LOOSE:
        return (f"is writable by others (mode {stat.S_IMODE(info.st_mode):o}); not loaded "
                "(it could be anyone's native code)")
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"
