"""tf2 transforms -> the LiDAR-to-camera extrinsic; CameraInfo -> P2 and R0_rect.

A ``geometry_msgs/TransformStamped`` with ``header.frame_id = parent`` and ``child_frame_id =
child`` is the pose of the child in the parent: ``p_parent = R(q) p_child + t``. The frames form
a tree (each child has one parent). ``Tr_velo_to_cam`` takes LiDAR points to the camera frame:
``p_cam = T(cam <- lidar) p_lidar``, composed along the tree path lidar -> common ancestor ->
camera, so a direct ``camera -> lidar`` edge gives back exactly the stored rotation and
translation (no extra arithmetic).

A TF carries a rigid transform (unit quaternion + translation): a calibration matrix that is
not exactly orthonormal (KITTI's 7-digit ``R``) comes back as the rotation of its quaternion.
"""

from __future__ import annotations

import numpy as np

from ...errors import DriveError


def quaternion_to_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """[3, 3] float64 rotation of a quaternion (normalised first)."""
    q = np.array([w, x, y, z], dtype=np.float64)
    norm = float(np.sqrt(q @ q))
    if not np.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"quaternion ({x}, {y}, {z}, {w}) has no direction")
    w, x, y, z = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def matrix_to_quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a [3, 3] rotation (Shepperd's method: divide by the largest term)."""
    m = np.asarray(rotation, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = (m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s
    norm = float(np.sqrt(sum(v * v for v in q)))
    return tuple(float(v) / norm for v in q)


def rigid_extrinsic(tr: np.ndarray) -> np.ndarray:
    """The [3, 4] transform a TF written from ``tr`` carries back (rotation via quaternion)."""
    out = np.array(tr, dtype=np.float64)
    out[:, :3] = quaternion_to_matrix(*matrix_to_quaternion(out[:, :3]))
    return out


def _edge_matrix(transform, where: str) -> np.ndarray:
    """[4, 4] parent <- child of a geometry_msgs/TransformStamped."""
    t, r = transform.transform.translation, transform.transform.rotation
    try:
        rotation = quaternion_to_matrix(r.x, r.y, r.z, r.w)
    except ValueError as exc:
        raise DriveError(f"{where}: transform {transform.header.frame_id} -> "
                         f"{transform.child_frame_id}: {exc}") from None
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    matrix[:3, 3] = (t.x, t.y, t.z)
    if not np.isfinite(matrix).all():
        raise DriveError(f"{where}: transform {transform.header.frame_id} -> "
                         f"{transform.child_frame_id} has NaN or infinite values")
    return matrix


class TfTree:
    """Frames and their parents, from TFMessages; the first value of each edge is kept (the
    LiDAR and the camera are rigidly mounted, so their chain does not change over a drive)."""

    def __init__(self):
        self.parent: dict[str, tuple[str, np.ndarray]] = {}

    def add(self, message, where: str) -> None:
        for transform in message.transforms:
            parent = str(transform.header.frame_id).lstrip("/")
            child = str(transform.child_frame_id).lstrip("/")
            if child not in self.parent:
                self.parent[child] = (parent, _edge_matrix(transform, where))

    def frames(self) -> list[str]:
        return sorted(set(self.parent) | {p for p, _ in self.parent.values()})

    def _path_up(self, frame: str) -> list[str]:
        path = [frame]
        while path[-1] in self.parent and len(path) <= len(self.parent) + 1:
            path.append(self.parent[path[-1]][0])
        return path

    def _down(self, path: list[str]) -> np.ndarray | None:
        """ancestor <- frame along ``path`` (frame first, ancestor last); None when empty."""
        matrix = None
        for frame in path[:-1]:
            edge = self.parent[frame][1]
            matrix = edge if matrix is None else edge @ matrix
        return matrix

    def lookup(self, target: str, source: str, where: str) -> np.ndarray:
        """[3, 4] float64 transform taking points in ``source`` to ``target``."""
        target, source = target.lstrip("/"), source.lstrip("/")
        if target == source:
            return np.eye(4)[:3]
        up_source, up_target = self._path_up(source), self._path_up(target)
        common = next((f for f in up_source if f in up_target), None)
        if common is None:
            raise DriveError(f"{where}: no transform chain from '{source}' to '{target}' in "
                             f"/tf and /tf_static (frames: {', '.join(self.frames()) or 'none'})")
        ancestor_from_source = self._down(up_source[:up_source.index(common) + 1])
        ancestor_from_target = self._down(up_target[:up_target.index(common) + 1])
        if ancestor_from_target is None:
            return ancestor_from_source[:3].copy()
        inverse = np.eye(4)
        rotation_t = ancestor_from_target[:3, :3].T
        inverse[:3, :3] = rotation_t
        inverse[:3, 3] = -rotation_t @ ancestor_from_target[:3, 3]
        if ancestor_from_source is None:
            return inverse[:3].copy()
        return (inverse @ ancestor_from_source)[:3]


def camera_info_calibration(msg, where: str) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """(P2 [3, 4], R0_rect [3, 3], (width, height)) of a sensor_msgs/CameraInfo.

    ``P`` projects rectified camera coordinates to pixels (KITTI's P_rect_02), ``R`` is the
    rectifying rotation (R_rect_00); an all-zero ``R`` (a monocular driver that leaves it
    unset) is read as the identity. An all-zero ``P`` means an uncalibrated camera: an error.
    """
    p_values = np.asarray(msg.p if hasattr(msg, "p") else msg.P, dtype=np.float64)
    r_values = np.asarray(msg.r if hasattr(msg, "r") else msg.R, dtype=np.float64)
    if p_values.size != 12 or r_values.size != 9:
        raise DriveError(f"{where}: CameraInfo P has {p_values.size} values, R {r_values.size}")
    if not (np.isfinite(p_values).all() and np.isfinite(r_values).all()):
        raise DriveError(f"{where}: CameraInfo P or R has NaN or infinite values")
    if not p_values.any():
        raise DriveError(f"{where}: CameraInfo P is all zeros (an uncalibrated camera)")
    r0 = r_values.reshape(3, 3) if r_values.any() else np.eye(3)
    return p_values.reshape(3, 4).copy(), r0.copy(), (int(msg.width), int(msg.height))
