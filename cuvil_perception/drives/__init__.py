"""Recorded drives in KITTI raw layout: reading (timestamps, calibration, points, images,
labels, synchronisation), ROS bags and MCAP files as drives (``drives.bag``), the registry of
drive formats (``registry``, the interface in ``format``) and ``open_recording`` for any of them
(by content), and the synthetic drive generator (``drives.synth``)."""

from .calib import Calibration, load_calibration, parse_calib_file, write_calibration
from .images import png_size, read_image
from .labels import CLASSES, LABEL_COLUMNS, read_labels, write_labels
from .points import read_points, write_points
from .reader import Drive, DriveFrame, drive_image_size, synchronise
from .recording import open_recording, recording_image_size
from .timestamps import format_timestamp, parse_timestamp, read_timestamps, write_timestamps

__all__ = ["CLASSES", "Calibration", "Drive", "DriveFrame", "LABEL_COLUMNS", "drive_image_size",
           "format_timestamp", "load_calibration", "parse_calib_file", "parse_timestamp",
           "open_recording", "png_size", "read_image", "read_labels", "read_points",
           "read_timestamps", "recording_image_size",
           "synchronise", "write_calibration", "write_labels", "write_points",
           "write_timestamps"]
