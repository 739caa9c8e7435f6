"""``<prefix>_detect`` of a whole-pipeline C library against the same native stages called from
Python, per KITTI frame, interleaved (issue 29).

The backbone is not native yet, so both sides are given ONNX Runtime's maps of the frame,
computed beforehand, and neither time includes the network:

- C: ``<prefix>_detect`` through ctypes (pillarize, PFN, the fused first layer, the backbone,
  heads at candidate cells, decode, sort, NMS), whose backbone here copies the frame's maps into
  the handle; the copy alone is timed too (31 MB a frame on the demo model), so "C minus copy"
  is the native stages' time;
- Python: ``PointPillars.bev`` + the candidate heads + ``postprocess`` on the same maps.

Run: PYTHONPATH=. python benchmarks/library_detect.py [FRAMES_DIR] (default
../shared/data/kitti_velodyne). The library is built for this machine (``--cpu host``) and for
the default CPU.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _util import interleaved, print_machine, print_table

from cuvil_perception.compile.library import build_library, symbols_for
from cuvil_perception.compile.prewarm import unique_specs
from cuvil_perception.compile.toolchain import host_arch
from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.pillars import c_detect
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
from cuvil_perception.ops.pillars.model import PointPillars

FRAMES = Path(__file__).resolve().parents[2] / "shared" / "data" / "kitti_velodyne"
BACKBONE = r"""
#include <stddef.h>
#include <string.h>
static const float *src[9]; static size_t bytes[9]; static int parts;
void bench_set(const float **maps, const size_t *sizes, int n) {
    for (int k = 0; k < n; k++) { src[k] = maps[k]; bytes[k] = sizes[k]; }
    parts = n - 1;
}
size_t bench_backbone_workspace(void) { return 64; }
int bench_backbone(void *ws, const float *input, float *cls, float *const *feats) {
    (void)ws; (void)input;
    memcpy(cls, src[0], bytes[0]);
    for (int k = 0; k < parts; k++) memcpy(feats[k], src[k + 1], bytes[k + 1]);
    return 0;
}
void bench_copy(float **into) { for (int k = 0; k <= parts; k++) memcpy(into[k], src[k], bytes[k]); }
"""


def build(pp: PointPillars, work: Path, cpu: str | None):
    """(the library loaded with the replaying backbone, the backbone's handle)."""
    backbone = work / "bb.c"
    backbone.write_text(BACKBONE)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(work / "libbb.so"),
                    str(backbone)], check=True)
    bb = ctypes.CDLL(str(work / "libbb.so"), mode=ctypes.RTLD_GLOBAL)
    specs = [s.release() for s in pp.kernels()]
    symbols = dict(symbols_for(unique_specs(specs), "bench"))
    lib = build_library(specs, f"{host_arch()}-linux-gnu", work / "lib", "bench", cpu,
                        parts=[c_detect.render(pp, symbols, "bench")])
    so = ctypes.CDLL(str(lib.shared_file))
    return so, bb, lib.target.cpu


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else FRAMES
    scans = sorted(folder.glob("*.bin"))[:10]
    config, head = PillarConfig(max_pillars=16000), HeadConfig()
    pp = PointPillars.from_onnx(builtin_models_dir() / "pointpillars_cuvil_demo.onnx", config,
                                head).open()
    frames = []
    for path in scans:
        points = np.fromfile(path, np.float32).reshape(-1, 4)
        maps = [np.ascontiguousarray(m, np.float32) for m in pp.runner.network(pp.bev(points))]
        frames.append((points, maps))
    print_machine()
    variants = {"python stages": lambda f: python_stages(pp, f)}
    keep = []
    for cpu in ("host", None):
        work = Path(tempfile.mkdtemp(prefix="bench_detect_"))
        so, bb, name = build(pp, work, cpu)
        handle = ctypes.c_void_p()
        assert so.bench_open(None, ctypes.byref(handle)) == 0
        keep.append((so, bb, handle))
        variants[f"C detect ({name})"] = c_detect_call(so, bb, handle)
        if cpu is None:
            variants["C: the maps' copy alone"] = copy_call(bb, frames[0][1])
    wall, cpu_ms = interleaved(variants, frames, reps=7)
    copy, copy_cpu = wall.pop("C: the maps' copy alone"), cpu_ms.pop("C: the maps' copy alone")
    rows = [(name, ms, cpu_ms[name], cpu_ms[name] - (copy_cpu if name.startswith("C") else 0))
            for name, ms in wall.items()]
    print_table(f"per frame, mean of {len(frames)} KITTI frames (median of 7), ms; the maps' "
                f"copy: {copy:.2f} wall, {copy_cpu:.2f} CPU",
                ["variant", "wall", "CPU (this thread)", "CPU without the copy"], rows)


def python_stages(pp: PointPillars, frame) -> None:
    points, maps = frame
    pp.bev(points)
    cells = pp.heads(maps[0], maps[1:])
    pp.postprocess(maps[0], cells.box, cells.dir)


def _set(bb, maps) -> None:
    pointers = (ctypes.c_void_p * len(maps))(*(m.ctypes.data for m in maps))
    sizes = (ctypes.c_size_t * len(maps))(*(m.nbytes for m in maps))
    bb.bench_set(pointers, sizes, len(maps))


def c_detect_call(so, bb, handle):
    boxes = ctypes.create_string_buffer(36 * 500)

    def call(frame) -> None:
        points, maps = frame
        _set(bb, maps)
        found = so.bench_detect(handle, ctypes.c_void_p(points.ctypes.data), len(points), boxes,
                                500)
        assert found >= 0, found
    return call


def copy_call(bb, maps):
    scratch = [np.empty_like(m) for m in maps]
    into = (ctypes.c_void_p * len(maps))(*(s.ctypes.data for s in scratch))

    def call(frame) -> None:
        _set(bb, frame[1])
        bb.bench_copy(into)
    return call


if __name__ == "__main__":
    main()
