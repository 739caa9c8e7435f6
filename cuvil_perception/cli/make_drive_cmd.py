"""``cuvil-perception make-drive OUT --frames N --seed S [--count K]``: write synthetic drives.

With ``--count K`` OUT is a fleet folder: drives ``OUT/drive_0000`` .. ``OUT/drive_<K-1>`` with
seeds S .. S+K-1 (``fleet`` takes ``OUT/drive_*``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import click

from ..drives.calib import CAM_TO_CAM, VELO_TO_CAM
from ..drives.labels import LABELS_DIR
from ..drives.reader import IMAGE_STREAM, LIDAR_STREAM
from ..errors import OutputWriteError, UsageError
from ..output_files import describe_os_error, write_text_atomic
from .progress import counter

# --count K names its drives OUT/drive_0000<suffix> ..
_SUFFIX = {"kitti": "", "mcap": ".mcap", "sqlite3": ".db3", "ros1": ".bag"}
# What make-drive writes, listed in the drive's marker; --force removes only what the marker
# lists (and only these names), never anything else in OUT, nothing in a folder without it.
_DRIVE_ENTRIES = (IMAGE_STREAM, LIDAR_STREAM, LABELS_DIR, CAM_TO_CAM, VELO_TO_CAM)
DRIVE_MARKER = ".cuvil-drive"


def _prepare(out: Path, force: bool) -> None:
    if os.path.lexists(out) and not out.is_dir():  # a dangling symlink or a loop too
        raise UsageError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise UsageError(f"{out}: folder is not empty (pass --force to overwrite a drive)")
        for name in _made_here(out):
            target = out / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif os.path.lexists(target):  # a file, or a link: the link goes, never its target
                target.unlink()


def _made_here(out: Path) -> list[str]:
    """The entries the make-drive marker in ``out`` says it made (a usage error without one)."""
    try:
        marker = json.loads((out / DRIVE_MARKER).read_text(encoding="utf-8"))
        made = marker["made"] if marker.get("format") == "cuvil-drive/1" else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        made = None
    if not isinstance(made, list):
        raise UsageError(f"{out}: folder is not empty and holds no make-drive marker "
                         f"({DRIVE_MARKER}); --force replaces only a drive make-drive wrote: "
                         "move its contents away or choose another OUT")
    return [name for name in _DRIVE_ENTRIES if name in made]


def _mark_drive(out: Path) -> None:
    """Before writing: the marker of what make-drive makes in ``out`` (so --force can replace
    a partial drive a killed make-drive left)."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / DRIVE_MARKER, json.dumps({"format": "cuvil-drive/1",
                                                      "made": list(_DRIVE_ENTRIES)}) + "\n")


def _make_bag(target: Path, frames: int, seed: int, fmt: str, force: bool, progress=None):
    """The synthetic drive written as a bag file at ``target`` (through a temporary KITTI
    folder beside it, named by ``temp_files.temp_path`` so that a later write into that folder
    removes it when make-drive was killed); --force replaces only an existing bag."""
    from ..drives.bag import is_bag, write_bag
    from ..drives.synth import make_drive
    from ..temp_files import sweep_stale, temp_path

    if os.path.lexists(target):
        if not force or not is_bag(target) or target.is_dir():
            raise UsageError(f"{target}: exists (pass --force to replace a bag file)")
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(target.parent)
    folder = temp_path(target)
    folder.mkdir()
    try:
        summary = make_drive(folder, frames, seed, progress)
        bag = write_bag(folder, target, fmt)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary.bytes = bag.bytes
    return summary


@click.command("make-drive")
@click.argument("out", type=click.Path())
@click.option("--frames", type=click.IntRange(1, 100_000), default=20, show_default=True,
              help="Number of frames (10 Hz).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Random seed (>= 0); the same seed writes the same bytes.")
@click.option("--count", type=click.IntRange(1, 10_000), default=None,
              help="Write K drives OUT/drive_0000.. with seeds SEED..SEED+K-1 (a fleet).")
@click.option("--force", is_flag=True,
              help="Overwrite the drive in a non-empty OUT (removes first what its make-drive "
                   "marker lists; a folder without one is refused).")
@click.option("--format", "fmt", type=click.Choice(("kitti", "mcap", "sqlite3", "ros1")),
              default="kitti", show_default=True,
              help="kitti: a KITTI-raw folder; mcap / sqlite3 / ros1: one ROS bag file at OUT "
                   "(ROS 2 MCAP, ROS 2 .db3, ROS 1 .bag; no labels).")
def make_drive_cmd(out: str, frames: int, seed: int, count: int | None, force: bool,
                   fmt: str) -> None:
    """Write a synthetic drive in KITTI raw layout to OUT (camera PNGs, LiDAR scans,
    calibration, timestamps and ground-truth labels), or as a ROS bag (--format), or --count K
    of them in OUT."""
    from ..drives.synth import make_drive  # keeps `--help` fast
    from ..rt.output_policy import Claim, check_outputs

    if count is not None and Path(out).exists() and not Path(out).is_dir():
        raise UsageError(f"{out}: exists and is not a folder (--count writes drives into it)")
    targets = [(Path(out), seed)] if count is None else \
        [(Path(out) / f"drive_{i:04d}{_SUFFIX[fmt]}", seed + i) for i in range(count)]
    if not force:
        for target, _ in targets:  # refuse before writing any drive
            _refuse_existing(target, fmt)
    check_outputs([Claim("OUT", target, folder=fmt == "kitti") for target, _ in targets], [],
                  overwrite=True)  # not-writable (a read-only folder); the rules above did the rest
    for target, drive_seed in targets:
        try:
            with counter(f"{target}: frame") as progress:
                if fmt != "kitti":
                    summary = _make_bag(target, frames, drive_seed, fmt, force, progress)
                else:
                    _prepare(target, force)
                    _mark_drive(target)
                    summary = make_drive(target, frames, drive_seed, progress)
        except OSError as exc:  # a full disk, an I/O error: one line, never a traceback
            if exc.errno == errno.ELOOP:
                raise
            left = " (the partial drive stays; --force replaces it)" if fmt == "kitti" else ""
            raise OutputWriteError(target, f"writing the drive failed "
                                   f"({describe_os_error(exc)}){left}") from None
        mean_points = sum(summary.points) / len(summary.points)
        click.echo(f"wrote {summary.frames} frames to {target} ({summary.bytes / 1e6:.1f} MB, "
                   f"{mean_points:,.0f} points per scan, seed {drive_seed}, "
                   f"{summary.seconds:.1f} s)")


def _refuse_existing(target: Path, fmt: str) -> None:
    """The check ``--force`` skips: a KITTI folder must be empty, a bag must not exist."""
    if fmt == "kitti":
        _prepare(target, force=False)
    elif target.exists():
        raise UsageError(f"{target}: exists (pass --force to replace a bag file)")
