"""``cuvil-perception convert DRIVE OUT``: a KITTI-raw drive (or a synthetic one) as a ROS bag."""

from __future__ import annotations

import errno
from pathlib import Path

import click

from ..drives.bag.write import FORMATS, IMAGE_ENCODINGS
from ..errors import OutputWriteError
from ..output_files import describe_os_error


@click.command("convert")
@click.argument("drive", type=click.Path(exists=True, file_okay=False))
@click.argument("out", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS),
              help="Output format [default: from OUT's extension: .mcap -> mcap, .db3 -> "
                   "sqlite3, .bag -> ros1; anything else -> rosbag2-mcap folder].")
@click.option("--image", "image_encoding", type=click.Choice(IMAGE_ENCODINGS), default="bgr8",
              show_default=True,
              help="Camera messages: raw Image (bgr8, rgb8) or CompressedImage (png, jpeg).")
def convert_cmd(drive: str, out: str, fmt: str | None, image_encoding: str) -> None:
    """Write DRIVE (KITTI raw layout) to OUT as a ROS bag with standard message types:
    PointCloud2, Image or CompressedImage, CameraInfo and /tf_static. OUT must not exist.
    Replay it with `run PIPELINE --replay OUT`; open an .mcap in Foxglove."""
    from ..drives.bag import write_bag
    from ..rt.output_policy import Claim, check_outputs

    # never into the drive it reads (OUT must not exist: write_bag's own rule, so overwrite)
    check_outputs([Claim("OUT", Path(out))], [Claim("DRIVE", Path(drive), folder=True)],
                  overwrite=True)
    try:
        summary = write_bag(Path(drive), Path(out), fmt, image_encoding)
    except OSError as exc:  # a full disk, an I/O error (write_bag removed its staging)
        if exc.errno == errno.ELOOP:
            raise
        raise OutputWriteError(out, f"writing the bag failed ({describe_os_error(exc)}); "
                               "nothing was kept") from None
    click.echo(f"wrote {summary.messages} messages to {summary.path} "
               f"({summary.bytes / 1e6:.1f} MB, {summary.seconds:.1f} s)")
