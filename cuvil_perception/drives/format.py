"""The ``DriveFormat`` interface: what a kind of recording (a KITTI-raw folder, a ROS bag, an
MCAP file, ...) provides so that ``--replay``, the ``replay``/``bag`` sources, ``inspect`` and
``render`` read it. The registry of formats is ``registry.FORMATS``; how to add one is in
docs/drive-format.md.

A format's ``open`` returns a reader with the interface of ``Recording`` (``reader.Drive`` and
``bag.BagDrive`` are the two built-in ones); the replay source uses nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ReadOptions:
    """How to read a recording: ``topics`` (stream -> topic, bags), ``stamp`` (``header`` or
    ``log``, bags) and ``intensity_scale`` (None: by the format's convention; a number
    multiplies the stored reflectance). A format ignores what does not apply to it."""

    topics: dict[str, str] = field(default_factory=dict)
    stamp: str = "header"
    intensity_scale: float | None = None


class Recording(Protocol):
    """A recording opened for replay: frames are synchronised (LiDAR scan, camera image) pairs.

    ``lidar.stamps`` int64 [S] scan times in ns; ``pairs`` list of (scan, image) indices, one
    per frame; ``calib`` a ``calib.Calibration``; ``image_size`` (width, height) or None;
    ``skipped`` scans without an image in tolerance; ``notes`` lines the run prints as info.
    A reader may also have ``damage`` (a cut file: replayed up to it) and ``close()``.
    """

    path: Path
    calib: object
    pairs: list
    skipped: int
    image_size: tuple[int, int] | None
    notes: list[str]

    def __len__(self) -> int: ...

    def read(self, index: int): ...  # -> reader.DriveFrame of frame ``index``

    def longest_gap(self) -> str | None: ...

    def scan_name(self, scan: int) -> str: ...


class DriveFormat(Protocol):
    """One kind of recording.

    ``name``: short id (``kitti``, ``mcap``, ...); ``title``: what a user calls it, for the
    message naming every format a path is not. ``holds`` (what a recording of this kind is and
    holds) and ``recognised_by`` (what ``detect`` looks for, with its confidences) are Markdown
    text: the format's row of the table in docs/drive-format.md, which
    ``registry.formats_markdown`` generates. ``detect`` returns a confidence in [0, 1]
    judged by content, never by extension (0: not this format; 1: its magic bytes or marker
    file; in between: a layout that may be it). ``open`` reads the index (it raises
    ``DriveError`` naming the file for anything wrong) and ``image_size`` answers
    (width, height) before opening, or None, cheaply and without raising.
    """

    name: str
    title: str
    holds: str
    recognised_by: str

    def detect(self, path: Path) -> float: ...

    def open(self, path: Path, sync_tolerance_ms: float, options: ReadOptions) -> Recording: ...

    def image_size(self, path: Path, options: ReadOptions) -> tuple[int, int] | None: ...
