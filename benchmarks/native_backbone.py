"""Benchmark the PointPillars BEV network lowered by our compiler (``runtime: native``) against
ONNX Runtime fp32, one thread each.

Run: ``python benchmarks/native_backbone.py [--passes N]``. The ten real KITTI frames in
``../shared/data/kitti_velodyne``, the demo model (KITTI grid, 16000 pillars) and the bundled
random-weight KITTI model. Each model is timed on its sparse path (the scatter fused into the
first layer, as ``pillars.detect`` runs by default; ONNX Runtime with the box / direction heads
at candidate cells, native with every layer skipping the cells that equal the empty frame's)
and its dense path (``sparse: false``: the [64, ny, nx] canvas in, every cell computed). What is
timed is the network after the scatter: the call from its input map to the three head maps.
Frames go in turn (the sparse layers keep the previous frame's state), the runtimes
interleaved frame by frame; a figure is the median over frames of each frame's best pass, in
thread CPU time (see ``_timed``; the wall-time ratio beside it). "cells" is the share of the network's output cells the native kernels computed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.pillars import PillarConfig, PointPillars  # noqa: E402
from cuvil_perception.ops.pillars.op import RANDOM_MODEL  # noqa: E402

DEMO_MODEL = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "kitti_velodyne"
MODELS = (("demo", DEMO_MODEL, PillarConfig(max_pillars=16000)),
          ("random KITTI", RANDOM_MODEL, PillarConfig()))


def _timed(model: PointPillars, points: np.ndarray) -> tuple:
    """(wall ms, thread CPU ms) of the network after the scatter on this frame's input map.
    Both runtimes compute on the calling thread (ONNX Runtime with one intra-op thread), so
    the thread's CPU time is their compute time without the time slices other processes took."""
    x = model.bev(points)
    wall, cpu = time.perf_counter(), time.thread_time()
    model.runner(x)
    return (time.perf_counter() - wall) * 1e3, (time.thread_time() - cpu) * 1e3


def _row(name: str, path: Path, config: PillarConfig, sparse: bool, clouds: list,
         passes: int) -> list:
    ort = PointPillars.from_onnx(path, config, runtime="onnxruntime", sparse=sparse).open()
    native = PointPillars.from_onnx(path, config, runtime="native", sparse=sparse).open()
    for points in clouds[:2]:  # warm-up: allocations, first-touch of the maps
        _timed(ort, points), _timed(native, points)
    times = {key: np.zeros((passes, len(clouds), 2)) for key in ("ort", "native")}
    shares = []
    cells = sum(m.height * m.width for m in _layer_maps(native))
    for p in range(passes):
        for k, points in enumerate(clouds):
            times["ort"][p, k] = _timed(ort, points)
            times["native"][p, k] = _timed(native, points)
            shares.append(native.runner.net.net.computed / cells)
    # per frame the best pass, then the median over frames; [..., 0] wall, [..., 1] CPU
    ort_ms, native_ms = (np.median(times[key].min(axis=0), axis=0) for key in ("ort", "native"))
    return [f"{name}, {'sparse' if sparse else 'dense'}", ort_ms[1], native_ms[1],
            f"{native_ms[1] / ort_ms[1]:.2f}x", f"{native_ms[0] / ort_ms[0]:.2f}x",
            f"{100 * statistics.mean(shares):.0f} %"]


def _layer_maps(model: PointPillars) -> list:
    """The output map of every conv / deconv step of the native network."""
    plan = model.runner.plan
    return [_Size(*_step_size(step)) for step in plan.steps
            if step.spec.name != "pillars.bev_mask_union"]


class _Size:
    def __init__(self, height: int, width: int):
        self.height, self.width = height, width


def _step_size(step) -> tuple:
    static = step.spec.static
    if step.spec.name == "pillars.bev_deconv":
        return static["hi"] * static["s"], static["wi"] * static["s"]
    return static["ho"], static["wo"]


def main() -> None:
    print_machine()
    if not DATA.is_dir():
        sys.exit(f"no KITTI frames at {DATA}")
    passes = int(sys.argv[sys.argv.index("--passes") + 1]) if "--passes" in sys.argv else 3
    clouds = [np.fromfile(f, np.float32).reshape(-1, 4) for f in sorted(DATA.glob("*.bin"))]
    rows = [_row(name, path, config, sparse, clouds, passes)
            for name, path, config in MODELS for sparse in (True, False)]
    print(f"KITTI frames: {len(clouds)}, {passes} passes, runtimes interleaved frame by frame")
    print_table("PointPillars network after the scatter, one thread (thread CPU ms per frame)",
                ["model, path", "onnxruntime ms", "native ms", "native / ort",
                 "native / ort (wall)", "cells computed"], rows)


if __name__ == "__main__":
    main()
