"""The simulated sensor rig: KITTI-like calibration (2011_09_26) and an HDL-64E-like LiDAR.

The LiDAR sits 1.73 m above a flat road (as on the KITTI car); the colour camera 2 is about
0.27 m in front of it and 8 cm lower, looking forward, 1242 x 375 pixels.
"""

from __future__ import annotations

import numpy as np

from ..calib import Calibration

LIDAR_HEIGHT = 1.73  # metres above the road; the road is the plane z = -LIDAR_HEIGHT
IMAGE_SIZE = (1242, 375)  # (width, height) in pixels
MAX_RANGE = 120.0  # metres; no return beyond this
AZIMUTH_STEPS = 1800  # 0.2 degree steps per revolution

# Values of the KITTI raw 2011_09_26 calibration, so drives look like real ones to every tool.
P_RECT_02 = np.array([[7.215377e+02, 0.0, 6.095593e+02, 4.485728e+01],
                      [0.0, 7.215377e+02, 1.728540e+02, 2.163791e-01],
                      [0.0, 0.0, 1.0, 2.745884e-03]])
R_RECT_00 = np.array([[9.999239e-01, 9.837760e-03, -7.445048e-03],
                      [-9.869795e-03, 9.999421e-01, -4.278459e-03],
                      [7.402527e-03, 4.351614e-03, 9.999631e-01]])
VELO_R = np.array([[7.533745e-03, -9.999714e-01, -6.166020e-04],
                   [1.480249e-02, 7.280733e-04, -9.998902e-01],
                   [9.998621e-01, 7.523790e-03, 1.480755e-02]])
VELO_T = np.array([-4.069766e-03, -7.631618e-02, -2.717806e-01])


def kitti_calibration() -> Calibration:
    """The rig's calibration (camera 2 projection, rectification, velodyne -> camera 0)."""
    return Calibration(P2=P_RECT_02.copy(), R0_rect=R_RECT_00.copy(),
                       Tr_velo_to_cam=np.concatenate([VELO_R, VELO_T[:, None]], axis=1),
                       image_size=IMAGE_SIZE)


def other_cameras() -> dict[str, dict]:
    """Entries for cameras 00, 01, 03 so that the calibration file is complete like KITTI's."""
    f, cx, cy = 7.215377e+02, 6.095593e+02, 1.728540e+02
    cams = {}
    for cid, tx, ty, tz in (("00", 0.0, 0.0, 0.0), ("01", -3.875744e+02, 0.0, 0.0),
                            ("03", -3.395242e+02, 2.199936e+00, 2.729905e-03)):
        p = np.array([[f, 0.0, cx, tx], [0.0, f, cy, ty], [0.0, 0.0, 1.0, tz]])
        cams[cid] = {"S_rect": np.array(IMAGE_SIZE, dtype=np.float64), "P_rect": p}
        if cid != "00":
            cams[cid]["R_rect"] = np.eye(3)
    return cams


def hdl64_elevations() -> np.ndarray:
    """64 beam elevations in radians, +2 deg down to -24.9 deg (upper block 1/3 deg apart,
    lower block 1/2 deg apart, like the HDL-64E)."""
    upper = np.linspace(2.0, -8.33, 32)
    lower = np.linspace(-8.83, -24.9, 32)
    return np.deg2rad(np.concatenate([upper, lower]))


def camera_rays(calib: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """Camera centre [3] and per-pixel ray directions [H, W, 3] in the velodyne frame.

    Directions are not normalised: a ray point is ``centre + t * dir`` with t the depth along
    the camera axis (up to the rectification's tiny tilt).
    """
    m = calib.velo_to_image()
    a_inv = np.linalg.inv(m[:, :3])
    centre = -a_inv @ m[:, 3]
    width, height = IMAGE_SIZE
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    pix = np.stack([u, v, np.ones_like(u)], axis=-1)
    return centre, pix @ a_inv.T
