"""Seeded synthetic drives in KITTI raw layout: a street with cars, pedestrians and cyclists,
seen by a KITTI-like camera (rendered) and an HDL-64E-like LiDAR (ray-cast)."""

from .scene import CAR, CYCLIST, PEDESTRIAN, Actor, Scene, make_scene
from .sensor import kitti_calibration
from .writer import DriveSummary, make_drive

__all__ = ["Actor", "CAR", "CYCLIST", "DriveSummary", "PEDESTRIAN", "Scene", "kitti_calibration",
           "make_drive", "make_scene"]
