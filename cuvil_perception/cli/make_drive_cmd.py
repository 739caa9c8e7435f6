"""``cuvil-perception make-drive OUT --frames N --seed S [--count K]``: write synthetic drives.

With ``--count K`` OUT is a fleet folder: drives ``OUT/drive_0000`` .. ``OUT/drive_<K-1>`` with
seeds S .. S+K-1 (``fleet`` takes ``OUT/drive_*``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from ..drives.calib import CAM_TO_CAM, VELO_TO_CAM
from ..drives.labels import LABELS_DIR
from ..drives.reader import IMAGE_STREAM, LIDAR_STREAM
from ..errors import UsageError

# What make-drive writes; --force removes exactly these, never anything else in OUT.
_DRIVE_ENTRIES = (IMAGE_STREAM, LIDAR_STREAM, LABELS_DIR, CAM_TO_CAM, VELO_TO_CAM)


def _prepare(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise UsageError(f"{out}: folder is not empty (pass --force to overwrite a drive)")
        for name in _DRIVE_ENTRIES:
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()


@click.command("make-drive")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--frames", type=click.IntRange(1, 100_000), default=20, show_default=True,
              help="Number of frames (10 Hz).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Random seed; the same seed writes the same bytes.")
@click.option("--count", type=click.IntRange(1, 10_000), default=None,
              help="Write K drives OUT/drive_0000.. with seeds SEED..SEED+K-1 (a fleet).")
@click.option("--force", is_flag=True,
              help="Overwrite the drive in a non-empty OUT (removes its drive folders first).")
def make_drive_cmd(out: str, frames: int, seed: int, count: int | None, force: bool) -> None:
    """Write a synthetic drive in KITTI raw layout to OUT (camera PNGs, LiDAR scans,
    calibration, timestamps and ground-truth labels), or --count K of them."""
    from ..drives.synth import make_drive  # keeps `--help` fast

    targets = [(Path(out), seed)] if count is None else \
        [(Path(out) / f"drive_{i:04d}", seed + i) for i in range(count)]
    if not force:
        for target, _ in targets:  # refuse before writing any drive
            _prepare(target, force=False)
    for target, drive_seed in targets:
        _prepare(target, force)
        summary = make_drive(target, frames, drive_seed)
        mean_points = sum(summary.points) / len(summary.points)
        click.echo(f"wrote {summary.frames} frames to {target} ({summary.bytes / 1e6:.1f} MB, "
                   f"{mean_points:,.0f} points per scan, seed {drive_seed}, "
                   f"{summary.seconds:.1f} s)")
