"""Jitter of the native kernels: call-latency distributions, cold vs prewarmed, and the first-frame
spike of the whole PointPillars path with and without prewarm.

Run: ``python benchmarks/jitter.py [--calls 10000] [--fifo PRIORITY]``. One thread (with
``--fifo``, under SCHED_FIFO at that priority, as ``rt: sched: {policy: fifo}`` gives a run),
KITTI frame 000000 from ``../shared/data/kitti_velodyne``, the KITTI grid with the lidar
pipeline's 16000 pillars and the demo model's head maps for decode + NMS. Under ``--fifo`` a max
near 50 ms is the kernel's RT throttling (``sched_rt_runtime_us`` 950000 of every second) hitting
a thread that computes without a pause; a pipeline idles between frames and never meets it.

1. Per kernel, ``--calls`` calls on the same frame, each timed alone (perf_counter_ns around the
   bound call: ~0.3-0.5 us of Python and ctypes are included). *cold*: an empty kernel cache and
   no kernel in memory, so the first call compiles (what a pipeline without prewarm does);
   *prewarmed*: the cache is warm and the kernel loaded before the first call (what ``run``
   does). p50 / p99 / p99.9 / max per distribution; jitter = max - p50.
2. The whole path (pillarize -> PFN -> scatter -> ONNX backbone -> decode -> NMS) on the ten
   frames: frame 0 against the median of frames 1-9, without prewarm (cold cache, lazy kernels,
   no warm-up pass) and with it (kernels loaded, one pass on an empty cloud, as the op's open()).

The issue's reference figures (a hot path with a prewarmed compile cache: p99 37 us, max jitter
12 us; without: 182 us and 410 us) are printed beside ours. Absolute times move with the load
of this shared machine; compare the rows of one run.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.compile import prewarm, registry  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.pillars import PillarConfig, PointPillars  # noqa: E402
from cuvil_perception.ops.pillars.config import HeadConfig  # noqa: E402
from cuvil_perception.ops.pillars.native import (DecodeKernel, NmsKernel, PfnKernel,  # noqa: E402
                                                 PillarizeKernel, ScatterKernel)
from cuvil_perception.rt.knobs import RtKnobs, apply_thread_knobs  # noqa: E402

MODEL = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "kitti_velodyne"
CONFIG, HEAD = PillarConfig(max_pillars=16000), HeadConfig()
CLAIM = {"prewarmed": (37.0, 12.0), "cold": (182.0, 410.0)}  # p99 us, max jitter us


def fresh_cache() -> None:
    """A new empty kernel cache directory and nothing memoised: the next get_kernel compiles."""
    os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp(prefix="cuvil-jitter-")
    registry.clear_memory()


def scan(index: int) -> np.ndarray:
    return np.fromfile(DATA / f"{index:06d}.bin", np.float32).reshape(-1, 4)


def kernel_calls(pp: PointPillars, points: np.ndarray) -> dict:
    """name -> (kernel object, zero-argument call on the same frame's inputs)."""
    pillars = pp.pillarize(points)
    features = pp.pfn(pillars).copy()
    maps = pp.runner(pp.scatter(features, pillars.coords, pillars.count))
    cand = pp.decode(*maps)
    boxes, scores, count = cand.boxes.copy(), cand.scores.copy(), cand.count
    kernels = {"pillarize": PillarizeKernel(CONFIG), "pfn": PfnKernel(CONFIG, pp.split.pfn),
               "scatter": ScatterKernel(CONFIG), "decode": DecodeKernel(CONFIG, HEAD,
                                                                        pp.anchors),
               "nms": NmsKernel(HEAD)}
    calls = {"pillarize": lambda k: k(points), "pfn": lambda k: k(pillars),
             "scatter": lambda k: k(features, pillars.coords, pillars.count),
             "decode": lambda k: k(*maps), "nms": lambda k: k(boxes, scores, count)}
    return {name: (kernels[name], calls[name]) for name in kernels}


def distribution(kernel, call, calls: int) -> np.ndarray:
    """Latency of each call in us (the first one opens the kernel if it is not open yet)."""
    out = np.empty(calls, np.float64)
    clock = time.perf_counter_ns
    for i in range(calls):
        t0 = clock()
        call(kernel)
        out[i] = clock() - t0
    return out / 1e3


def summary(name: str, mode: str, us: np.ndarray) -> list:
    p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
    return [name, mode, us[0], p50, p99, p999, us.max(), us.max() - p50]


def per_kernel(points: np.ndarray, calls: int) -> list[list]:
    rows = []
    for mode in ("cold", "prewarmed"):
        fresh_cache()
        pp = PointPillars.from_onnx(MODEL, CONFIG, HEAD)
        if mode == "prewarmed":
            prewarm(pp.kernels())
            registry.clear_memory()  # a new process: only the disk cache is warm...
            prewarm(pp.kernels())    # ...and run's prewarm loads every kernel before frame 0
        pp.open()
        for name, (kernel, call) in kernel_calls(pp, points).items():
            if mode == "cold":
                fresh_cache()  # this kernel's first call compiles
            else:
                kernel.open()
            rows.append(summary(name, mode, distribution(kernel, call, calls)))
    return rows


def first_frame(frames: list[np.ndarray]) -> list[list]:
    rows = []
    for mode in ("without prewarm", "with prewarm"):
        fresh_cache()
        if mode == "with prewarm":
            pp = PointPillars.from_onnx(MODEL, CONFIG, HEAD).open()
            pp.detect(np.zeros((0, 4), np.float32))
        else:
            pp = PointPillars.from_onnx(MODEL, CONFIG, HEAD)  # kernels bind on first call
        ms = []
        for points in frames:
            t0 = time.perf_counter()
            pp.detect(points)
            ms.append((time.perf_counter() - t0) * 1e3)
        rest = float(np.median(ms[1:]))
        rows.append([mode, ms[0], rest, ms[0] - rest, ms[0] / rest])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls per distribution")
    parser.add_argument("--fifo", type=int, metavar="PRIORITY",
                        help="measure under SCHED_FIFO at this priority (1..99)")
    args = parser.parse_args()
    print_machine()
    calls = args.calls
    if not DATA.is_dir():
        sys.exit(f"KITTI frames not found at {DATA}")
    if args.fifo is not None:
        refused = []
        apply_thread_knobs(RtKnobs(fifo_priority=args.fifo), "compute", refused.append)
        print(refused[0] if refused else f"measuring under SCHED_FIFO priority {args.fifo}")
    frames = [scan(i) for i in range(10)]
    print_table(f"call latency per kernel, {calls} calls on KITTI frame 0 (us; jitter = max - "
                "p50)", ["kernel", "mode", "first call", "p50", "p99", "p99.9", "max",
                         "jitter"], per_kernel(frames[0], calls))
    print_table("issue figures (a hot path: p99 / max jitter, us)", ["mode", "p99", "jitter"],
                [[mode, *CLAIM[mode]] for mode in ("cold", "prewarmed")])
    print_table("first-frame spike of the PointPillars path, 10 KITTI frames (ms)",
                ["mode", "frame 0", "median 1-9", "spike", "frame 0 / median"],
                first_frame(frames))


if __name__ == "__main__":
    main()
