"""Actors of a synthetic drive and where they are at a given time.

All positions are in the velodyne frame of the (moving) ego car: x forward, y left, z up,
metres. Each actor moves along the road at a constant speed; its x wraps around inside a window
ahead of the car, so a long drive keeps a steady population in front of the sensors (an actor
leaving the window behind the car reappears at the far end, like new traffic arriving).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sensor import LIDAR_HEIGHT

CAR, PEDESTRIAN, CYCLIST = 0, 1, 2
EGO_SPEED = 6.0  # m/s along +x
WINDOW = (4.0, 60.0)  # x range actors wrap inside (ego lane starts further out)
EGO_LANE_START = 10.0

_BASE_SIZE = {CAR: (3.9, 1.6, 1.56), PEDESTRIAN: (0.8, 0.6, 1.73), CYCLIST: (1.76, 0.6, 1.73)}
_CAR_COLOURS = ((40, 40, 170), (170, 90, 30), (200, 200, 200), (35, 35, 35), (40, 150, 200),
                (120, 120, 120), (30, 90, 40), (230, 230, 230))


@dataclass(frozen=True)
class Actor:
    """One road user. ``size`` = (dx, dy, dz) = length, width, height in metres; ``speed`` is
    m/s along ``heading`` (0 = +x, pi = towards the ego car); ``colour`` BGR main colour."""

    track_id: int
    cls: int
    size: tuple[float, float, float]
    y: float
    x0: float
    speed: float
    heading: float
    colour: tuple[int, int, int]
    accent: tuple[int, int, int]
    reflectance: float

    def x_at(self, t: float) -> float:
        """Centre x (m) at ``t`` seconds after the drive started, wrapped into the window."""
        low = EGO_LANE_START if abs(self.y) < 1.0 else WINDOW[0]
        span = WINDOW[1] - low
        relative = self.speed * np.cos(self.heading) - EGO_SPEED
        return float(low + np.mod(self.x0 + relative * t - low, span))

    def box_at(self, t: float) -> np.ndarray:
        """[x, y, z, dx, dy, dz, heading] (float64) with z the box centre."""
        dx, dy, dz = self.size
        return np.array([self.x_at(t), self.y, -LIDAR_HEIGHT + dz / 2, dx, dy, dz,
                         self.heading])

    def parts(self) -> list[tuple[np.ndarray, tuple[int, int, int], float]]:
        """Sub-boxes in the actor frame: ([cx, cy, cz, dx, dy, dz] with z from the box centre,
        BGR colour, reflectance). Cameras and LiDAR both see exactly these."""
        dx, dy, dz = self.size
        bottom = -dz / 2
        if self.cls == CAR:
            body_h = 0.55 * dz
            return [(np.array([0.0, 0.0, bottom + body_h / 2, dx, dy, body_h]), self.colour,
                     self.reflectance),
                    (np.array([-0.08 * dx, 0.0, bottom + body_h + (dz - body_h) / 2,
                               0.55 * dx, 0.9 * dy, dz - body_h]), self.accent,
                     0.6 * self.reflectance)]
        if self.cls == PEDESTRIAN:
            legs, torso = 0.47 * dz, 0.38 * dz
            return [(np.array([0.0, 0.0, bottom + legs / 2, 0.5 * dx, 0.8 * dy, legs]),
                     self.accent, 0.15),
                    (np.array([0.0, 0.0, bottom + legs + torso / 2, 0.6 * dx, dy, torso]),
                     self.colour, self.reflectance),
                    (np.array([0.0, 0.0, bottom + legs + torso + (dz - legs - torso) / 2,
                               0.3 * dx, 0.4 * dy, dz - legs - torso]), (120, 150, 200), 0.2)]
        bike = 0.5 * dz
        return [(np.array([0.0, 0.0, bottom + bike / 2, dx, 0.35 * dy, bike]), self.accent, 0.35),
                (np.array([-0.1 * dx, 0.0, bottom + bike + (dz - bike) / 2, 0.4 * dx, dy,
                           dz - bike]), self.colour, self.reflectance)]


@dataclass(frozen=True)
class Scene:
    actors: tuple[Actor, ...]
    ground_phases: np.ndarray  # [4] phases of the road texture

    def boxes_at(self, t: float) -> np.ndarray:
        """float64 [K, 7] boxes of all actors at time t (s)."""
        return np.array([a.box_at(t) for a in self.actors]).reshape(-1, 7)


def _size(rng: np.random.Generator, cls: int) -> tuple[float, float, float]:
    jitter = rng.uniform(0.9, 1.1, size=3)
    return tuple(float(round(s * j, 3)) for s, j in zip(_BASE_SIZE[cls], jitter))


def _lane(rng, cls, y, count, speed_range, heading, track_id) -> list[Actor]:
    low = EGO_LANE_START if abs(y) < 1.0 else WINDOW[0]
    spacing = (WINDOW[1] - low) / count
    start = rng.uniform(0, spacing)
    actors = []
    for k in range(count):
        size = _size(rng, cls)
        slack = max(0.0, spacing - size[0] - 3.0) / 2  # keep actors in one lane apart
        colour = _CAR_COLOURS[int(rng.integers(len(_CAR_COLOURS)))] if cls == CAR else \
            tuple(int(c) for c in rng.integers(40, 230, size=3))
        accent = (45, 35, 30) if cls == CAR else tuple(int(c) for c in rng.integers(20, 90, 3))
        actors.append(Actor(
            track_id=track_id + k, cls=cls, size=size,
            y=float(y + (rng.uniform(-0.6, 0.6) if cls == PEDESTRIAN else rng.uniform(-0.2, 0.2))),
            x0=float(low + start + k * spacing + rng.uniform(-slack, slack)),
            speed=float(rng.uniform(*speed_range)),
            heading=float(heading + rng.uniform(-0.04, 0.04)), colour=colour, accent=accent,
            reflectance=float(rng.uniform(0.25, 0.6))))
    return actors


def make_scene(rng: np.random.Generator) -> Scene:
    """A seeded street scene: 5-8 cars in three lanes, 4-5 pedestrians, 2 cyclists."""
    groups = [(CAR, 0.0, int(rng.integers(1, 3)), (5.0, 7.0), 0.0),
              (CAR, -3.5, int(rng.integers(2, 4)), (7.0, 9.0), 0.0),
              (CAR, 3.5, int(rng.integers(2, 4)), (7.0, 10.0), np.pi),
              (PEDESTRIAN, -8.4, int(rng.integers(2, 4)), (1.0, 1.6), 0.0),
              (PEDESTRIAN, 8.4, 2, (1.0, 1.6), np.pi),
              (CYCLIST, -6.0, 1, (4.0, 6.0), 0.0),
              (CYCLIST, 6.0, 1, (4.0, 6.0), np.pi)]
    actors: list[Actor] = []
    for cls, y, count, speeds, heading in groups:
        actors += _lane(rng, cls, y, count, speeds, heading, len(actors))
    return Scene(tuple(actors), rng.uniform(0, 2 * np.pi, size=4))
