"""Oriented boxes (rotated about +z): corners, faces and ray intersection, vectorised."""

from __future__ import annotations

import numpy as np

# Corner order: bit 0 -> +x, bit 1 -> +y, bit 2 -> +z (in the box frame).
_SIGNS = np.array([[(i & 1) * 2 - 1, ((i >> 1) & 1) * 2 - 1, ((i >> 2) & 1) * 2 - 1]
                   for i in range(8)], dtype=np.float64)
# Faces as corner indices in a cycle, with their outward normal in the box frame.
FACES = ((np.array([1, 3, 7, 5]), np.array([1.0, 0, 0])),
         (np.array([0, 4, 6, 2]), np.array([-1.0, 0, 0])),
         (np.array([2, 6, 7, 3]), np.array([0, 1.0, 0])),
         (np.array([0, 1, 5, 4]), np.array([0, -1.0, 0])),
         (np.array([4, 5, 7, 6]), np.array([0, 0, 1.0])),
         (np.array([0, 2, 3, 1]), np.array([0, 0, -1.0])))


def rotation_z(heading: float) -> np.ndarray:
    c, s = np.cos(heading), np.sin(heading)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def box_corners(centre: np.ndarray, size: np.ndarray, heading: float) -> np.ndarray:
    """[8, 3] corners of a box (centre [3], size (dx, dy, dz) [3], yaw ``heading`` rad)."""
    return (_SIGNS * (np.asarray(size) / 2)) @ rotation_z(heading).T + np.asarray(centre)


def part_in_world(box: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A part ([cx, cy, cz, dx, dy, dz] in the actor frame) of actor ``box`` [7] ->
    (centre [3] in the velodyne frame, size [3]); the part shares the actor's heading."""
    centre = box[:3] + rotation_z(box[6]) @ part[:3]
    return centre, part[3:6]


def ray_box(origin: np.ndarray, dirs: np.ndarray, centre: np.ndarray, size: np.ndarray,
            heading: float) -> tuple[np.ndarray, np.ndarray]:
    """Slab test of rays ``origin + t * dirs`` ([R, 3]) against one oriented box.

    Returns (t [R] float64, inf where missed or behind; |cos| of the incidence angle [R]).
    """
    rot_t = rotation_z(heading).T  # world -> box frame
    local_o = rot_t @ (origin - centre)
    local_d = dirs @ rot_t.T
    half = np.asarray(size) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / local_d
        t1 = (-half - local_o) * inv
        t2 = (half - local_o) * inv
    near = np.minimum(t1, t2)
    far = np.maximum(t1, t2)
    near = np.where(np.isnan(near), -np.inf, near)
    far = np.where(np.isnan(far), np.inf, far)
    t_near = near.max(axis=1)
    t_far = far.min(axis=1)
    hit = (t_near <= t_far) & (t_near > 0)
    axis = near.argmax(axis=1)
    norm = np.linalg.norm(local_d, axis=1)
    cos = np.abs(local_d[np.arange(local_d.shape[0]), axis]) / np.maximum(norm, 1e-12)
    return np.where(hit, t_near, np.inf), cos
