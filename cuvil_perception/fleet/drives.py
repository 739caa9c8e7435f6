"""Which drives a fleet run covers: folders, bag files, globs and list files, expanded in order.

A DRIVES argument is

- a path (a drive folder, a bag file, anything ``--replay`` accepts: the replay source decides
  what it can read, per drive, so a new drive format needs no change here);
- a glob (``drives/drive_*``, ``**/*.mcap``): every match, sorted; no match is an error;
- a list file, ``@FILE`` or a file ending in ``.txt`` / ``.list``: one path or glob per line,
  relative to the list file's folder; blank lines and ``#`` comments are skipped;
- a URL (``s3://bucket/drives/drive_0003``, ``file:///data/drive_0003``, a glob of them): read
  through fsspec by every node that runs it (``transport``), never by the driver's file system.

The same drive named twice is kept once (first position wins). A missing path is an error
naming it (and the list file's line); nothing starts until every argument resolves.

A drive is identified by its resolved path (or URL) plus a **fingerprint**: sha256 over every
file in it (relative path, size, mtime in ns; for a URL, its ETag or modification time). A
re-recorded or regenerated drive gets a new fingerprint and ``--resume`` runs it again. File metadata rather than bytes, because reading a terabyte
fleet twice just to decide what to skip would cost more than the runs it saves.
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from .transport import is_url, url_files, url_fs, url_stamp

LIST_SUFFIXES = (".txt", ".list")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class DriveRef:
    """One drive of a fleet: ``path`` (resolved), ``name`` (unique within the fleet: the
    folder or file name, with a short hash of the path when two drives share a name), ``url``
    (a drive named by URL; ``path`` is then the URL's path, for its name only)."""

    path: Path
    name: str
    url: str | None = None

    @property
    def location(self) -> str:
        """What a task is given: the URL, else the absolute path."""
        return self.url or str(self.path)


def discover(arguments: list[str]) -> list[DriveRef]:
    """Expand DRIVES arguments (see the module docstring) into unique drives, in order."""
    if not arguments:
        raise UsageError("no drives given: pass drive folders, bag files, globs or a list file")
    found: list[Path | str] = []
    for argument in arguments:
        found.extend(_expand(argument, Path.cwd(), argument))
    unique = list(dict.fromkeys(found))
    return _named(unique)


def _expand_url(url: str, where: str) -> list[str]:
    """A URL, or every match of a URL glob (sorted); checked to exist through fsspec."""
    fs, path = url_fs(url)
    protocol = url.split("://", 1)[0]
    try:
        if _GLOB_CHARS & set(path):
            matches = sorted(fs.glob(path))
            if not matches:
                raise UsageError(f"{where}: the pattern matches no drive")
            return [f"{protocol}://{m.lstrip('/') if protocol != 'file' else m}"
                    for m in matches]
        if not fs.exists(path):
            raise UsageError(f"{where}: no such drive (folder or file)")
    except (OSError, ValueError) as exc:  # unreachable store, refused credentials: one line
        raise UsageError(f"{where}: cannot read it ({str(exc).splitlines()[0]})") from None
    return [url.rstrip("/")]


def _expand(argument: str, base: Path, where: str) -> list[Path | str]:
    if is_url(argument.strip()):
        return _expand_url(argument.strip(), where)
    try:
        return _expand_path(argument, base, where)
    except OSError as exc:  # an unreadable folder on the way: one line, never a traceback
        raise UsageError(f"{where}: cannot read {exc.filename or argument} "
                         f"({(exc.strerror or str(exc)).lower()})") from None


def _expand_path(argument: str, base: Path, where: str) -> list[Path]:
    if not argument.strip():
        raise UsageError(f"{where}: empty drive path")
    if argument.startswith("@"):
        return _read_list(_absolute(argument[1:], base))
    path = _absolute(argument, base)
    if _GLOB_CHARS & set(argument):
        matches = sorted(glob.glob(str(path), recursive=True))
        if not matches:
            raise UsageError(f"{where}: the pattern matches no drive")
        return [Path(m).resolve() for m in matches]
    if path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
        return _read_list(path)
    if not path.exists():
        raise UsageError(f"{where}: no such drive (folder or file)")
    return [path.resolve()]


def _absolute(text: str, base: Path) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def _read_list(path: Path) -> list[Path]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such drive list") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the drive list ({exc})") from None
    found: list[Path] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("@") or Path(text).suffix.lower() in LIST_SUFFIXES:
            raise UsageError(f"{path}:{number}: a list file cannot name another list file")
        found.extend(_expand(text, path.parent, f"{path}:{number}: {text}"))
    if not found:
        raise UsageError(f"{path}: the drive list names no drive")
    return found


def _named(found: list[Path | str]) -> list[DriveRef]:
    counts: dict[str, int] = {}
    paths = [Path(f.split("://", 1)[1]) if isinstance(f, str) else f for f in found]
    for path in paths:
        counts[path.name] = counts.get(path.name, 0) + 1
    refs = []
    for item, path in zip(found, paths):
        name = path.name
        if counts[name] > 1:
            name = f"{name}-{hashlib.sha256(str(item).encode()).hexdigest()[:8]}"
        refs.append(DriveRef(path, name, item if isinstance(item, str) else None))
    return refs


def fingerprint(drive: DriveRef | Path) -> str:
    """sha256 hex of every file of the drive (or the file itself): relative path, size and
    mtime_ns (a URL: size and ETag or modification time), in sorted order. Raises UsageError
    when the drive is gone."""
    if isinstance(drive, DriveRef) and drive.url is not None:
        return _url_fingerprint(drive.url)
    path = drive.path if isinstance(drive, DriveRef) else drive
    digest = hashlib.sha256()
    try:
        if path.is_file():
            entries = [(path.name, path.stat())]
        else:
            entries = []
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = Path(root, name)
                    entries.append((str(full.relative_to(path)), full.stat()))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the drive ({exc.strerror or exc})") from None
    for relative, stat in entries:
        digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _url_fingerprint(url: str) -> str:
    digest = hashlib.sha256()
    try:
        files = url_files(url)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{url}: cannot read the drive ({str(exc).splitlines()[0]})") from None
    for relative, info in files:
        digest.update(f"{relative}\0{info.get('size')}\0{url_stamp(info)}\n".encode())
    return digest.hexdigest()
