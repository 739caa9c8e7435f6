"""Open any recorded drive: a KITTI-raw folder, a ROS bag, an MCAP file or any other format in
the registry (``registry.FORMATS``), told apart by content, so ``--replay``, the replay sources
and ``render`` take each of them."""

from __future__ import annotations

from pathlib import Path

from .format import ReadOptions, Recording
from .registry import find_format, format_of


def open_recording(path: Path, sync_tolerance_ms: float = 50.0, *,
                   topics: dict[str, str] | None = None, stamp: str = "header",
                   intensity_scale: float | None = None) -> Recording:
    """The reader of the format ``path`` holds (``Drive`` for a KITTI-raw folder, ``BagDrive``
    for a bag; ``topics`` and ``stamp`` apply to bags only, ``intensity_scale`` to every
    format); DriveError for a file that no format recognises."""
    options = ReadOptions(dict(topics or {}), stamp, intensity_scale)
    return format_of(path).open(Path(path), sync_tolerance_ms, options)


def recording_image_size(path: Path, topics: dict[str, str] | None = None
                         ) -> tuple[int, int] | None:
    """(width, height) of a recording's camera before it is opened, or None."""
    fmt = find_format(path)
    return None if fmt is None else fmt.image_size(Path(path), ReadOptions(dict(topics or {})))
