"""Inputs the kernel benchmarks share: the KITTI scans (or random points in range), the
default pillar / head configs, the YOLO grids, a seeded conv layer, and the demo PointPillars
model's head maps on the sample drive's first frame.

(They lived in benchmarks/lang_vs_ir.py, the side-by-side of the kernel-language ports and
the hand-built IR kernels they replaced; that benchmark and benchmarks/ir_baseline/ were
removed after commit 96a65d84da4f: `git show 96a65d84da4f:benchmarks/lang_vs_ir.py`.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
from cuvil_perception.ops.pillars.model import PointPillars
from cuvil_perception.ops.pillars.types import ConvLayer

HERE = Path(__file__).resolve().parent
GRIDS, NC = [(80, 80), (40, 40), (20, 20)], 80
PC, HC = PillarConfig(), HeadConfig()
KITTI = HERE.parents[1] / "shared" / "data" / "kitti_velodyne"
DRIVE = HERE.parent / "datasets" / "sample_drive" / "velodyne_points" / "data"
CONV = ConvLayer(np.random.default_rng(3).normal(0, 0.12, (64, 64, 3, 3)).astype(np.float32),
                 np.random.default_rng(4).normal(0, 0.3, 64).astype(np.float32), (2, 2),
                 (1, 1, 1, 1))


def kitti_points(rng, index: int = 0) -> np.ndarray:
    """A real KITTI scan (../shared/data) if present, else 20k random points in the range:
    float32 [N, 4] (x, y, z, intensity)."""
    frames = sorted(KITTI.glob("*.bin"))
    if frames:
        return np.fromfile(frames[index % len(frames)], np.float32).reshape(-1, 4)
    lo, hi = np.array(PC.point_cloud_range[:3]), np.array(PC.point_cloud_range[3:])
    xyz = rng.uniform(lo, hi, (20000, 3))
    return np.concatenate([xyz, rng.uniform(0, 1, (20000, 1))], axis=1).astype(np.float32)


def demo_heads():
    """The demo model, and its class map and feature parts on the sample drive's first frame
    (~220 candidate cells: the gate over 53568 cells is most of the work)."""
    model = PointPillars.from_onnx(builtin_models_dir() / "pointpillars_cuvil_demo.onnx",
                                   PillarConfig(max_pillars=16000)).open()
    points = np.fromfile(sorted(DRIVE.glob("*.bin"))[0], np.float32).reshape(-1, 4)
    pillars = model.pillarize(points)
    cls_map, *feat = model.runner.network(model.scatter(model.pfn(pillars), pillars.coords,
                                                        pillars.count))
    return model, np.ascontiguousarray(cls_map), [np.ascontiguousarray(f) for f in feat]
