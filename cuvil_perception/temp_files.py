"""Names for the temporary files and folders of all-or-nothing writes, and removing the ones a
killed run left behind.

Every temporary file or folder this tool writes next to an output ``NAME`` is called

    .NAME.cuvil-HOST-PID-RANDOM.tmp

``HOST`` is 8 hex digits (CRC-32 of the host name), ``PID`` the writing process, ``RANDOM`` 12
hex digits drawn per name, so two threads writing one output, or a later process that was given
the same PID, never share a name. A finished write renames it onto the output and a failed one
removes it; only ``kill -9``, an OOM kill or a power cut leaves one behind.

``sweep_stale(folder)`` removes such leftovers. It removes an entry only when all of these hold:

* its whole name matches the pattern above (the ``cuvil-`` tag, the digit counts, the ``.tmp``
  end): a user's own ``.notes.tmp`` or ``.out.json.1234.tmp`` never matches;
* ``HOST`` is this host: on a folder shared between machines a PID from another host says
  nothing about whether its writer is alive, so those are left to their own host;
* no process ``PID`` exists (``kill(pid, 0)`` fails with "no such process"). A PID reused by
  an unrelated live process keeps the entry until a later sweep, which errs on the safe side;
* it is a regular file or a real folder (never a symlink; folders are removed without following
  symlinks inside them).

Writers sweep the folder they write into once per process (on the first write there), so a run
writing thousands of PNGs into one folder lists that folder once.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
import stat
import zlib
from pathlib import Path

_PATTERN = re.compile(r"\.(?P<output>.+)\.cuvil-(?P<host>[0-9a-f]{8})-(?P<pid>[1-9][0-9]{0,6})"
                      r"-[0-9a-f]{12}\.tmp")
_PID_MAX = 1 << 22  # Linux's largest possible pid_max; a larger number was never a PID
_swept: set[str] = set()  # folders this process has swept already


def host_tag() -> str:
    """8 hex digits naming this host in temporary names."""
    return f"{zlib.crc32(socket.gethostname().encode('utf-8')):08x}"


def temp_path(path: str | Path) -> Path:
    """A fresh temporary name beside ``path`` (not created here)."""
    path = Path(path)
    return path.with_name(f".{path.name}.cuvil-{host_tag()}-{os.getpid()}-"
                          f"{secrets.token_hex(6)}.tmp")


def process_alive(pid: int) -> bool:
    """False only when no process ``pid`` exists on this host; True when unsure."""
    if not 0 < pid < _PID_MAX:
        return True  # kill(0, ...) would mean our own process group: never treat it as dead
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH  # EPERM: it exists, under another user
    return True


def stale_temps(folder: str | Path) -> list[Path]:
    """The entries of ``folder`` that ``sweep_stale`` would remove (see the module docstring)."""
    host = host_tag()
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        match = _PATTERN.fullmatch(entry.name)
        if match is None or match["host"] != host or process_alive(int(match["pid"])):
            continue
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            found.append(Path(entry.path))
    return sorted(found)


def sweep_stale(folder: str | Path, again: bool = False) -> list[Path]:
    """Remove the stale temporary entries of ``folder`` (once per process unless ``again``);
    returns what was removed. Best effort: an entry that cannot be removed is left."""
    key = os.path.abspath(folder)
    if key in _swept and not again:
        return []
    _swept.add(key)
    removed = []
    for path in stale_temps(folder):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed
