"""Static configuration of the PointPillars path: the pillar grid and the detection head.

Everything here is fixed before the first frame; the native kernels bake these numbers in as
constants (loop bounds, grid sizes, anchor tables). Defaults are OpenPCDet's KITTI PointPillars.
Coordinates are in the LiDAR (velodyne) frame: x forward, y left, z up, metres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...errors import ConfigError
from ..logit_gate import logit_gate  # noqa: F401  (the decode kernels import it from here)

KITTI_RANGE = (0.0, -39.68, -3.0, 69.12, 39.68, 1.0)
KITTI_VOXEL = (0.16, 0.16, 4.0)


@dataclass(frozen=True)
class PillarConfig:
    """The pillar grid.

    ``point_cloud_range`` = (x_min, y_min, z_min, x_max, y_max, z_max) in metres: a point is kept
    when min <= p < max on every axis. ``voxel_size`` = (vx, vy, vz) metres; it must divide the
    range, and vz must span the whole height (one pillar per (x, y) cell, nz == 1).
    Derived: ``nx``, ``ny``, ``nz`` cells.
    """

    point_cloud_range: tuple = KITTI_RANGE
    voxel_size: tuple = KITTI_VOXEL
    max_points_per_pillar: int = 32
    max_pillars: int = 12000
    num_features: int = 64  # PFN output channels (C of the [C, ny, nx] BEV map)
    nx: int = field(init=False)
    ny: int = field(init=False)
    nz: int = field(init=False)

    def __post_init__(self) -> None:
        rng = _floats(self.point_cloud_range, 6, "point_cloud_range")
        vox = _floats(self.voxel_size, 3, "voxel_size")
        object.__setattr__(self, "point_cloud_range", rng)
        object.__setattr__(self, "voxel_size", vox)
        cells = []
        for axis, name in enumerate("xyz"):
            low, high, size = rng[axis], rng[axis + 3], vox[axis]
            if not high > low:
                raise ConfigError(f"PillarConfig: point_cloud_range is empty along {name} "
                                  f"({name}_min {low} >= {name}_max {high})",
                                  "point_cloud_range")
            if not size > 0:
                raise ConfigError(f"PillarConfig: voxel_size {name} must be > 0, got {size}",
                                  "voxel_size")
            ratio = (high - low) / size
            count = round(ratio)
            if count < 1 or abs(ratio - count) > 1e-4 * max(1.0, ratio):
                raise ConfigError(f"PillarConfig: voxel_size {name} = {size} does not divide the "
                                  f"range {low}..{high} ({ratio:.6g} cells)", "voxel_size")
            cells.append(count)
        if cells[2] != 1:
            raise ConfigError(f"PillarConfig: voxel_size z = {vox[2]} must span the whole range "
                              f"height {rng[5] - rng[2]} (pillars have nz == 1, got {cells[2]})",
                              "voxel_size")
        for name in ("max_points_per_pillar", "max_pillars", "num_features"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"PillarConfig: {name} must be a positive integer, got {value!r}",
                                  name)
        object.__setattr__(self, "nx", cells[0])
        object.__setattr__(self, "ny", cells[1])
        object.__setattr__(self, "nz", cells[2])

    @property
    def num_cells(self) -> int:
        """ny * nx, the number of BEV cells."""
        return self.ny * self.nx


@dataclass(frozen=True)
class AnchorClass:
    """One class's anchor: size (dx, dy, dz) metres and the z of its bottom face."""

    name: str
    size: tuple
    bottom: float


KITTI_ANCHORS = (
    AnchorClass("Car", (3.9, 1.6, 1.56), -1.78),
    AnchorClass("Pedestrian", (0.8, 0.6, 1.73), -0.6),
    AnchorClass("Cyclist", (1.76, 0.6, 1.73), -0.6),
)


@dataclass(frozen=True)
class HeadConfig:
    """Anchors, decoding and NMS of OpenPCDet's AnchorHeadSingle (class-agnostic NMS).

    ``stride`` is the backbone's output stride: the head map is (ny / stride, nx / stride).
    ``max_candidates`` bounds the anchors kept after the score threshold; the default 0 means
    "every anchor", so the buffer cannot overflow; a smaller cap counts its overflow.
    """

    anchors: tuple = KITTI_ANCHORS
    rotations: tuple = (0.0, math.pi / 2)
    stride: int = 2
    score_threshold: float = 0.1
    nms_pre: int = 4096
    nms_threshold: float = 0.01
    nms_post: int = 500
    dir_offset: float = 0.78539
    max_candidates: int = 0

    def __post_init__(self) -> None:
        if not self.anchors or not self.rotations:
            raise ConfigError("HeadConfig: anchors and rotations must not be empty",
                              "rotations" if self.anchors else "anchors")
        for name in ("stride", "nms_pre", "nms_post"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"HeadConfig: {name} must be a positive integer, got {value!r}",
                                  name)
        if self.max_candidates < 0:
            raise ConfigError("HeadConfig: max_candidates must be >= 0 (0 = every anchor)",
                              "max_candidates")
        if not 0.0 <= self.score_threshold < 1.0:
            raise ConfigError(f"HeadConfig: score_threshold must be in [0, 1), got "
                              f"{self.score_threshold}", "score_threshold")

    @property
    def num_classes(self) -> int:
        return len(self.anchors)

    @property
    def anchors_per_cell(self) -> int:
        return len(self.anchors) * len(self.rotations)

    def map_size(self, pillars: PillarConfig) -> tuple[int, int]:
        """(H, W) of the head maps for this grid; raises ConfigError if the stride does not fit."""
        if pillars.ny % self.stride or pillars.nx % self.stride:
            raise ConfigError(f"HeadConfig: stride {self.stride} does not divide the grid "
                              f"{pillars.ny} x {pillars.nx}", "stride")
        return pillars.ny // self.stride, pillars.nx // self.stride

    def candidate_capacity(self, pillars: PillarConfig) -> int:
        """Size of the static candidate buffer (every anchor unless capped)."""
        height, width = self.map_size(pillars)
        total = height * width * self.anchors_per_cell
        return total if self.max_candidates == 0 else min(self.max_candidates, total)


def _floats(values, length: int, name: str) -> tuple:
    try:
        result = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(f"PillarConfig: {name} must be {length} numbers, "
                          f"got {values!r}", name) from None
    if len(result) != length or not all(math.isfinite(v) for v in result):
        raise ConfigError(f"PillarConfig: {name} must be {length} finite numbers, got {values!r}",
                          name)
    return result
