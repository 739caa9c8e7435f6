"""How a drive reaches the node that runs it: by path, as bytes shipped from the driver, by URL.

A task names its drive by *location*: an absolute path on the driver's machine, or a URL
(``file://``, ``s3://``, any protocol fsspec knows). On the node that runs it, ``local_drive``
gives a folder or file the replay source can open:

1. a URL: downloaded through fsspec into the task's temporary folder (every node reads it the
   same way; credentials and endpoints are the nodes' own, e.g. ``AWS_*`` variables);
2. a path readable here: used as it is (the driver's machine, or a shared file system);
3. else the drive's bytes, when the task carries them (``pack`` on the driver; the Ray backend
   sends them through its object store), written into the temporary folder under the drive's
   own name (a replay does not depend on where the drive sits);
4. else ``DriveNotHere``: this node cannot read the drive. Not the drive's fault, so the fleet
   retries it on another node, with its bytes.

Shipped drives are whole copies in memory (driver, object store, worker): right for drives of
a few GB; a larger fleet is better named by URL or put on a shared file system.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class DriveNotHere(OSError):
    """The node running a task cannot read its drive (missing here, or no permission)."""


def is_url(location: str) -> bool:
    """``s3://bucket/drive``, ``file:///data/drive``: a location fsspec opens."""
    return bool(_URL.match(location))


def readable_here(location: str) -> bool:
    """Whether this process can open ``location`` as a local path (URLs: always, by fsspec)."""
    if is_url(location):
        return True
    return os.path.exists(location) and os.access(location, os.R_OK)


def pack(location: str) -> dict[str, bytes]:
    """The drive's files as ``{relative path: bytes}`` (``""`` for a drive that is one file)."""
    path = Path(location)
    if path.is_file():
        return {"": path.read_bytes()}
    files = {}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = Path(root, name)
            files[str(full.relative_to(path))] = full.read_bytes()
    return files


def unpack(files: dict[str, bytes], target: Path) -> Path:
    """Write ``pack``'s files as ``target`` (a folder, or a file for a one-file drive)."""
    if set(files) == {""}:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[""])
        return target
    for relative, data in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return target


@contextmanager
def local_drive(location: str, tmp: Path, shipped: dict[str, bytes] | None = None):
    """A local path of the drive at ``location`` for this node (see the module docstring);
    ``tmp``: a folder this call may write into (removed by the caller)."""
    if is_url(location):
        yield fetch_url(location, tmp / "fetched")
    elif readable_here(location):
        yield location
    elif shipped is not None:
        yield str(unpack(shipped, tmp / "shipped" / Path(location).name))
    else:
        raise DriveNotHere(f"{location}: this node cannot read the drive ({_why(location)}); "
                           "retried on another node, with the drive's bytes")


def _why(location: str) -> str:
    return "no permission" if os.path.exists(location) else "no such file or folder here"


def url_fs(url: str):
    """``(fsspec filesystem, path inside it)``; fsspec missing is a usage error."""
    from ..errors import UsageError

    try:
        import fsspec
    except ImportError:
        raise UsageError(f"{url}: drives named by URL need fsspec: "
                         "pip install 'cuvil-perception[fleet]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:  # an unknown protocol, its package missing
        raise UsageError(f"{url}: {str(exc).splitlines()[0]}") from None


def url_files(url: str) -> list[tuple[str, dict]]:
    """``[(relative path, fsspec info)]`` of every file of the drive at ``url``, sorted
    (``""``: the URL is one file)."""
    fs, root = url_fs(url)
    if not fs.isdir(root):
        return [("", fs.info(root))]
    found = fs.find(root, detail=True)
    prefix = root.rstrip("/") + "/"
    return sorted((name[len(prefix):], info) for name, info in found.items()
                  if name.startswith(prefix))


def fetch_url(url: str, target: Path) -> str:
    """Download the drive at ``url`` as ``target/<its name>``; returns that local path."""
    fs, root = url_fs(url)
    local = target / (root.rstrip("/").rsplit("/", 1)[-1] or "drive")
    files = url_files(url)
    for relative, info in files:
        path = local / relative if relative else local
        path.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(info["name"], str(path))
    return str(local)


def url_stamp(info: dict) -> str:
    """What changes when a remote file is rewritten: its ETag, else its modification time."""
    for key in ("ETag", "etag", "LastModified", "mtime", "updated", "created"):
        if info.get(key) is not None:
            return str(info[key])
    return ""
