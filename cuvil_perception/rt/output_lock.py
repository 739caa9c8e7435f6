"""One writer per output: an exclusive lock on each output a command writes, for the command's
life, so two runs (or fleets) started on the same ``--out`` never interleave their frames.

The lock of an output ``DIR/NAME`` (a file or a folder) is ``flock(LOCK_EX | LOCK_NB)`` on
``DIR/.NAME.cuvil-lock``, a file holding the owner's ``pid host`` (outputs written by a rename
replace their inode, so the output itself cannot carry the lock). A command that finds a lock
held stops before writing anything: `OutputPathError` (exit 2, rule ``busy``) naming the output
and the other run's pid. The lock file is removed when the command ends; one left by a killed
run (``kill -9``) holds no lock (the kernel released it) and is taken over by the next run.
Taking a lock checks that the locked file is still the one at the lock's path, so a lock file
being removed by its finishing owner is never mistaken for a free one. An existing output that
is not a file or folder (``/dev/null``, a FIFO) is not locked; an existing file in a folder this
user cannot write (it can only be written in place) is locked itself, with no pid to name.
"""

from __future__ import annotations

import errno
import fcntl
import os
import platform
import stat
from pathlib import Path

from ..errors import OutputPathError
from .output_policy import Claim

_SUFFIX = ".cuvil-lock"


def lock_path(output: Path) -> Path:
    """Where the lock of ``output`` (a resolved path) lives."""
    return output.parent / f".{output.name}{_SUFFIX}"


class OutputLocks:
    """The held locks of one command (`hold`); ``release`` removes them (idempotent)."""

    def __init__(self) -> None:
        self._held: list[tuple[Path, int]] = []

    def take(self, claim: Claim) -> None:
        target = claim.resolved
        kind = _kind(target)
        if kind == "device":  # /dev/null, a FIFO: nothing to keep whole, no lock file in /dev
            return
        path = lock_path(target)
        if any(held == path for held, _ in self._held):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                if kind != "file" or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise
                path, fd = target, os.open(target, os.O_RDONLY | os.O_CLOEXEC)  # a file in a
                # folder we cannot write (it is written in place): lock the file itself
            self._lock(fd, claim, holds_pid=path != target)
            if path == target or _same_file(fd, path):
                break
            os.close(fd)  # its owner removed it between our open and our lock: try again
        if path != target:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {platform.node()}\n".encode())
        self._held.append((path, fd))

    @staticmethod
    def _lock(fd: int, claim: Claim, holds_pid: bool) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = _owner(fd) if holds_pid else "pid unknown"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise OutputPathError(claim.path, f"{claim.role} is being written by another "
                                  f"run ({owner}); wait for it to end or give this one "
                                  "another path", "busy") from None

    def release(self) -> None:
        while self._held:
            path, fd = self._held.pop()
            if path.name.endswith(_SUFFIX):
                try:
                    path.unlink()  # still holding the lock: nobody can be using it
                except OSError:
                    pass
            os.close(fd)

    def __enter__(self) -> OutputLocks:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def hold(outputs: list[Claim]) -> OutputLocks:
    """Lock every output of ``outputs`` (after the output-path policy has passed them); on a
    held one, release those taken and raise `OutputPathError` (rule ``busy``)."""
    locks = OutputLocks()
    try:
        for claim in outputs:
            locks.take(claim)
    except BaseException:
        locks.release()
        raise
    return locks


def _kind(path: Path) -> str:
    """``file``, ``folder``, ``device`` (anything else that exists) or ``new``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "new"
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "device"


def _owner(fd: int) -> str:
    try:
        pid, _, host = os.pread(fd, 256, 0).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return "pid unknown"
    if not pid.isdigit():
        return "pid unknown"
    return f"pid {pid}" + (f" on {host}" if host and host != platform.node() else "")


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
