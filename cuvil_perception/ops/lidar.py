"""LiDAR ops for the demo pipeline: ``lidar.crop`` (range crop) and ``lidar.bev`` (bird's-eye
occupancy image). Points are float32 [N, 4] (x, y, z, reflectance) in the velodyne frame
(x forward, y left, z up, metres). Ranges are [low, high): low inclusive, high exclusive, as
in PointPillars' pillarize.
"""

from __future__ import annotations

import numpy as np

from ..graph import FrameInfo, Op, Param, ParamProblem, PortSpec, Range, register

KITTI_X = [0.0, 69.12]
KITTI_Y = [-39.68, 39.68]
KITTI_Z = [-3.0, 1.0]
MAX_BEV_SIDE = 4096
DENSITY_SATURATION = 64  # points per cell that map to full density


LIDAR_REACH = Range(-1000.0, 1000.0)  # m: far beyond any LiDAR; larger is a typo


def _range_params() -> tuple[Param, ...]:
    return tuple(Param(f"{axis}_range", list, list(default), f"[low, high) {meaning}, m",
                       item_type=float, length=2, range=LIDAR_REACH, unit="m")
                 for axis, default, meaning in (("x", KITTI_X, "forward"), ("y", KITTI_Y, "left"),
                                                ("z", KITTI_Z, "up")))


def _check_ranges(p: dict) -> None:
    for name in ("x_range", "y_range", "z_range"):
        low, high = p[name]
        if not low < high:
            raise ParamProblem(name, f"must be [low, high] with low < high, got {p[name]}")


def crop_mask(points: np.ndarray, x_range, y_range, z_range) -> np.ndarray:
    """bool [N]: rows with low <= coordinate < high on all three axes."""
    mask = np.ones(points.shape[0], dtype=bool)
    for axis, (low, high) in enumerate((x_range, y_range, z_range)):
        mask &= (points[:, axis] >= np.float32(low)) & (points[:, axis] < np.float32(high))
    return mask


def bev_shape(x_range, y_range, resolution: float) -> tuple[int, int]:
    """(H, W) of the BEV image: rows along x (forward is up), columns along y (left is left)."""
    return (int(round((x_range[1] - x_range[0]) / resolution)),
            int(round((y_range[1] - y_range[0]) / resolution)))


def bev_image(points: np.ndarray, x_range, y_range, z_range, resolution: float) -> np.ndarray:
    """uint8 [H, W, 3] bird's-eye view of the points inside the ranges.

    Row 0 is the far edge (x high), column 0 the left edge (y high). Channels (BGR order, as
    the png sink writes them): 0 = max reflectance x 255, 1 = max height (z_range mapped to
    0..255), 2 = density log(1 + n) / log(64) x 255, saturating at 64 points per cell.
    Empty cells are 0 in every channel.
    """
    height, width = bev_shape(x_range, y_range, resolution)
    inside = points[crop_mask(points, x_range, y_range, z_range)]
    ix = np.floor((inside[:, 0] - x_range[0]) / resolution).astype(np.int64)
    iy = np.floor((inside[:, 1] - y_range[0]) / resolution).astype(np.int64)
    ok = (ix >= 0) & (ix < height) & (iy >= 0) & (iy < width)  # float rounding at the edges
    cell = (height - 1 - ix[ok]) * width + (width - 1 - iy[ok])
    inside = inside[ok]
    count = np.bincount(cell, minlength=height * width)
    # float32 accumulators: ufunc.at has a fast path only when array and values share a dtype
    span = np.float32(z_range[1] - z_range[0])
    top = np.zeros(height * width, dtype=np.float32)
    np.maximum.at(top, cell, (inside[:, 2] - np.float32(z_range[0])) / span)
    bright = np.zeros(height * width, dtype=np.float32)
    np.maximum.at(bright, cell, np.clip(inside[:, 3], 0.0, 1.0))
    occupied = np.flatnonzero(count)
    density = np.minimum(1.0, np.log1p(count[occupied]) / np.log(DENSITY_SATURATION))
    image = np.zeros((height * width, 3), dtype=np.uint8)
    for channel, values in enumerate((bright[occupied], top[occupied], density)):
        image[occupied, channel] = np.round(np.clip(values, 0.0, 1.0) * 255.0)
    return image.reshape(height, width, 3)


@register
class LidarCrop(Op):
    """Keep the points inside an axis-aligned box (default: the KITTI PointPillars range)."""

    name = "lidar.crop"
    tag = "compute"
    doc = "Keep LiDAR points inside x/y/z ranges (low inclusive, high exclusive)."
    params = _range_params()

    def check(self) -> None:
        _check_ranges(self.p)

    def input_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("points", "float32", (None, 4), "x, y, z, reflectance (velodyne)"),)

    def output_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("points", "float32", (None, 4), "points inside the ranges, in order"),)

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        points = inputs["points"]
        mask = crop_mask(points, self.p["x_range"], self.p["y_range"], self.p["z_range"])
        return {"points": np.ascontiguousarray(points[mask])}


@register
class LidarBev(Op):
    """Bird's-eye-view image: reflectance, height and density channels per grid cell."""

    name = "lidar.bev"
    tag = "compute"
    doc = "Bird's-eye occupancy image uint8 [H, W, 3] (reflectance, height, density)."
    params = _range_params() + (Param("resolution", float, 0.16, "cell size, m",
                                      range=Range(0.0, 100.0, low_open=True), unit="m"),)

    def check(self) -> None:
        _check_ranges(self.p)
        resolution = self.p["resolution"]
        height, width = bev_shape(self.p["x_range"], self.p["y_range"], resolution)
        if not (1 <= height <= MAX_BEV_SIDE and 1 <= width <= MAX_BEV_SIDE):
            raise ParamProblem("resolution", f"gives a {height}x{width} image; each side must "
                                             f"be 1..{MAX_BEV_SIDE} cells")

    def input_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("points", "float32", (None, 4), "x, y, z, reflectance (velodyne)"),)

    def output_ports(self) -> tuple[PortSpec, ...]:
        height, width = bev_shape(self.p["x_range"], self.p["y_range"], self.p["resolution"])
        return (PortSpec("image", "uint8", (height, width, 3),
                         "BEV: B reflectance, G height, R density; up = forward"),)

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        image = bev_image(inputs["points"], self.p["x_range"], self.p["y_range"],
                          self.p["z_range"], self.p["resolution"])
        return {"image": image}
