"""Ray-cast an HDL-64E-like scan against the road and the actors (vectorised numpy).

64 beams x ``AZIMUTH_STEPS`` azimuths from the sensor origin; each ray returns the nearest hit
on the ground plane or an actor part within ``MAX_RANGE``, with reflectance from the material
scaled by the incidence angle, a little Gaussian range noise and random dropouts. Rows are
ordered azimuth-major (one 64-beam firing after another), starting behind the car.
"""

from __future__ import annotations

import numpy as np

from . import road
from .geometry import part_in_world, ray_box
from .scene import Scene
from .sensor import AZIMUTH_STEPS, LIDAR_HEIGHT, MAX_RANGE, hdl64_elevations

RANGE_NOISE = 0.02  # metres, 1 sigma
DROPOUT = 0.02  # fraction of rays that return nothing


def scan(scene: Scene, t: float, travelled: float, rng: np.random.Generator,
         azimuth_steps: int = AZIMUTH_STEPS) -> tuple[np.ndarray, np.ndarray]:
    """(points float32 [N, 4] (x, y, z, reflectance), actor index int32 [N], -1 for ground)."""
    elev = hdl64_elevations()
    start = np.pi - rng.uniform(0, 2 * np.pi / azimuth_steps)  # sensor phase jitters per scan
    azim = start - np.arange(azimuth_steps) * (2 * np.pi / azimuth_steps)
    ce, se = np.cos(elev), np.sin(elev)
    dirs = np.stack([np.cos(azim)[:, None] * ce, np.sin(azim)[:, None] * ce,
                     np.broadcast_to(se, (azimuth_steps, elev.size))], axis=-1)
    dirs = dirs.reshape(-1, 3)
    n = dirs.shape[0]
    with np.errstate(divide="ignore"):
        best = np.where(dirs[:, 2] < 0, -LIDAR_HEIGHT / dirs[:, 2], np.inf)
    cos = np.abs(dirs[:, 2])
    owner = np.full(n, -1, dtype=np.int32)
    refl = np.zeros(n)
    for index, actor in enumerate(scene.actors):
        box = actor.box_at(t)
        cols = _columns_facing(box, azim)
        rows = (cols[:, None] * elev.size + np.arange(elev.size)).ravel()
        for part, _, part_refl in actor.parts():
            centre, size = part_in_world(box, part)
            t_hit, c = ray_box(np.zeros(3), dirs[rows], centre, size, box[6])
            closer = t_hit < best[rows]
            sel = rows[closer]
            best[sel], cos[sel], owner[sel], refl[sel] = t_hit[closer], c[closer], index, part_refl
    keep = (best <= MAX_RANGE) & (rng.random(n) >= DROPOUT)
    dist = best[keep] + rng.normal(0.0, RANGE_NOISE, size=int(keep.sum()))
    xyz = dirs[keep] * dist[:, None]
    refl = refl[keep]
    ground = owner[keep] < 0
    gx, gy = xyz[ground, 0], xyz[ground, 1]
    material = road.material(gx, gy, travelled)
    refl[ground] = road.REFLECTANCE[material] * (1 + 0.25 * road.texture(
        gx, gy, travelled, scene.ground_phases))
    refl = refl * (0.35 + 0.65 * cos[keep]) + rng.normal(0.0, 0.02, size=refl.size)
    refl = np.round(np.clip(refl, 0.0, 1.0), 2)
    points = np.concatenate([xyz, refl[:, None]], axis=1).astype(np.float32)
    return points, owner[keep]


def _columns_facing(box: np.ndarray, azim: np.ndarray) -> np.ndarray:
    """Azimuth column indices whose rays can reach the actor's bounding circle."""
    radius = 0.5 * float(np.hypot(box[3], box[4])) + 0.05
    dist = float(np.hypot(box[0], box[1]))
    if dist <= radius:
        return np.arange(azim.size)
    half = np.arcsin(radius / dist)
    diff = np.angle(np.exp(1j * (azim - np.arctan2(box[1], box[0]))))
    return np.nonzero(np.abs(diff) <= half)[0]
