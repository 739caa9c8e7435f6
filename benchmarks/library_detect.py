"""``<prefix>_detect`` of the whole-pipeline C library (the native backbone included) against
the Python pipeline, per scan, interleaved (issue 29).

Variants, all on the calling thread (one ONNX Runtime intra-op thread), the same scans in the
same order (each keeps its own state across frames: the fused first layer's map, the native
layers' change masks):

- ``python, onnxruntime``: ``PointPillars.detect`` as configs/lidar_pillars.yaml runs it
  (runtime auto: ONNX Runtime for the network);
- ``python, native``: the same with ``runtime: native`` (the network as our kernels, called
  from Python one layer at a time);
- ``C detect (<cpu>)``: ``<prefix>_detect`` through ctypes, the library ``compile --library``
  writes (c_net), for the default CPU and for this machine (``--cpu host``).

Run: PYTHONPATH=. python benchmarks/library_detect.py [SCANS_DIR] (default: the bundled
drive's scans, what configs/lidar_pillars.yaml reads). Reports wall and thread CPU time per
scan (the machine is shared: compare the CPU column, and ratios).
"""

from __future__ import annotations

import ctypes
import sys
import tempfile
from pathlib import Path

import numpy as np
from _util import interleaved, print_machine, print_table

from cuvil_perception.compile.library import build_library, library_target, symbols_for
from cuvil_perception.compile.kernel_prewarm import unique_specs
from cuvil_perception.compile.toolchain import host_arch
from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.pillars.c_net import library_kernels, library_part, library_plan
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
from cuvil_perception.ops.pillars.model import PointPillars

SCANS = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive" / "velodyne_points" \
    / "data"
MODEL = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
CONFIG, HEAD = PillarConfig(max_pillars=16000), HeadConfig()  # configs/lidar_pillars.yaml
BOX_BYTES = 36  # sizeof(<prefix>_box)


def build(pp: PointPillars, work: Path, cpu: str | None):
    """(the library loaded, its target CPU name)."""
    triple = f"{host_arch()}-linux-gnu"
    plan = library_plan(pp, target=library_target(triple, cpu))
    specs = [s.release() for s in library_kernels(pp, plan)]
    symbols = dict(symbols_for(unique_specs(specs), "bench"))
    part = library_part(pp, plan, symbols, "bench")
    lib = build_library(specs, triple, work / "lib", "bench", cpu, parts=[part])
    return ctypes.CDLL(str(lib.shared_file)), lib.target.cpu


def c_detect_call(so, handle):
    boxes = ctypes.create_string_buffer(BOX_BYTES * HEAD.nms_post)

    def call(points) -> None:
        found = so.bench_detect(handle, ctypes.c_void_p(points.ctypes.data), len(points), boxes,
                                HEAD.nms_post)
        assert found >= 0, found
    return call


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else SCANS
    frames = [np.fromfile(p, np.float32).reshape(-1, 4) for p in sorted(folder.glob("*.bin"))]
    frames = frames[:10]
    ort = PointPillars.from_onnx(MODEL, CONFIG, HEAD).open()
    native = PointPillars.from_onnx(MODEL, CONFIG, HEAD, runtime="native").open()
    print_machine()
    variants = {"python, onnxruntime": ort.detect, "python, native": native.detect}
    keep = []
    for cpu in (None, "host"):
        so, name = build(native, Path(tempfile.mkdtemp(prefix="bench_detect_")), cpu)
        handle = ctypes.c_void_p()
        assert so.bench_open(None, ctypes.byref(handle)) == 0
        keep.append((so, handle))
        variants[f"C detect ({name})"] = c_detect_call(so, handle)
    for fn in variants.values():  # first calls: every layer computes every cell
        fn(frames[0])
    wall, cpu_ms = interleaved(variants, frames, reps=7)
    base = cpu_ms["python, onnxruntime"]
    rows = [(name, ms, cpu_ms[name], f"{base / cpu_ms[name]:.2f}x") for name, ms in wall.items()]
    print_table(f"whole pipeline per scan, mean of {len(frames)} scans of {folder.name} "
                f"(median of 7), ms", ["variant", "wall", "CPU (this thread)",
                                       "CPU speed-up vs python onnxruntime"], rows)
    for so, handle in keep:
        so.bench_close(handle)


if __name__ == "__main__":
    main()
