"""Benchmark the PointPillars pre/post-processing kernels: native vs the numpy reference.

Run: ``python benchmarks/pillars.py [--sparse-only]``. First table: the dense path (``sparse:
false``) against the sparse one (``true``), fp32 and int8 (``quantize``), stage by stage (see
``_pillars_sparse``). Then: one
thread, the ten real KITTI frames in ``../shared/data/kitti_velodyne``, the KITTI grid
(432 x 496, 12000 pillars) and the bundled random-weight model's head maps for decode + NMS.
Each frame is processed in turn (as in a drive of unrelated scans: the worst case for the
incremental scatter clear); every figure is the mean
over the frames of the median over passes. "bytes" is what a kernel must read + write at element
granularity (for scatter: the features read plus whole 64-byte lines of the [C, ny, nx] map,
written once by the streaming kernel, read for ownership and written back by the cell-granular
orders), "floor" that volume at the measured copy bandwidth (read + write counted; for the streaming
scatter rows at the measured streaming-store bandwidth, as their bytes are mostly such writes). The
features of the ten frames are separate arrays (30 MB): scatter reads them from DRAM here,
from cache in a pipeline (PFN has just written them).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pillars_sparse import stage_rows  # noqa: E402
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.compile.lang import Buf, f32, i64, kernel, simd  # noqa: E402
from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.drives.synth import make_drive  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.pillars import PillarConfig, PointPillars, reference  # noqa: E402
from cuvil_perception.ops.pillars.native import SCATTER_ORDERS, ScatterKernel  # noqa: E402
from cuvil_perception.ops.pillars.op import RANDOM_MODEL  # noqa: E402
from cuvil_perception.quantize import quantize_model  # noqa: E402

DEMO_MODEL = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "kitti_velodyne"
DRIVE = (Path(__file__).resolve().parents[1] / "datasets" / "sample_drive" / "velodyne_points"
         / "data")


def bandwidth_gbs() -> float:
    """Copy bandwidth of a 256 MB buffer (read + write counted), GB/s."""
    src = np.ones(64 << 20, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = min(_time(lambda: np.copyto(dst, src)) for _ in range(3))
    return 2 * src.nbytes / best / 1e9


@kernel(name="bench.stream_zero")
def stream_zero(dst: Buf[f32], lines: i64):
    """Zero ``lines`` 64-byte lines from ``dst`` on (64-byte aligned) with streaming stores."""
    for i in range(lines):
        simd.stream_fill(dst, i * 16, 16, 0.0)
    simd.fence()


def stream_bandwidth_gbs() -> float:
    """Streaming-store (write-only, no read for ownership) bandwidth over 16 MB, GB/s."""
    from cuvil_perception.compile import get_kernel
    kernel = get_kernel(stream_zero.spec())
    raw = np.zeros((64 << 20) // 4 + 16, np.float32)
    start = raw.ctypes.data + (-raw.ctypes.data % 64)
    lines = (16 << 20) // 64
    best = min(_time(lambda: kernel(start + (k % 4) * (16 << 20), lines)) for k in range(12))
    return lines * 64 / best / 1e9


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def per_frame_ms(fn, inputs: list, passes: int) -> float:
    """Mean over inputs of the median over passes (ms), inputs visited in turn every pass."""
    samples = [[] for _ in inputs]
    for _ in range(passes):
        for k, item in enumerate(inputs):
            samples[k].append(_time(lambda: fn(item)) * 1e3)
    return statistics.mean(statistics.median(s) for s in samples)


def scatter_bytes(frames: list, config, streamed: bool = True) -> float:
    """Mean bytes a frame's scatter must move: the map lines it touches ((this frame's cells |
    last frame's) x C channels x 64 B; written once by full-line streaming stores, or read for
    ownership and written back when ``streamed`` is False) plus the features it reads."""
    total = []
    for k, pillars in enumerate(frames):
        prev = frames[k - 1]
        lines = set()
        for p in (pillars, prev):
            cells = p.coords[:p.count, 1].astype(np.int64) * config.nx + p.coords[:p.count, 2]
            lines.update((cells // 16).tolist())
        map_bytes = len(lines) * config.num_features * 64 * (1 if streamed else 2)
        total.append(map_bytes + pillars.count * config.num_features * 4)
    return statistics.mean(total)


class Bench:
    """The frames, the model, precomputed inputs of every step, and the rows measured so far."""

    def __init__(self, clouds: list, model: PointPillars, gbs: float, stream_gbs: float):
        self.clouds, self.model, self.gbs, self.stream_gbs = clouds, model, gbs, stream_gbs
        self.config, self.head = model.config, model.head
        self.pillars = [reference.pillarize(c, self.config) for c in clouds]
        self.features = [reference.pfn(p, model.split.pfn, self.config) for p in self.pillars]
        self.maps = [model.runner(model.bev(c)) for c in clouds]
        self.cap = self.head.candidate_capacity(self.config)
        self.cands = [reference.decode_boxes(*m, model.anchors, self.head, self.cap)
                      for m in self.maps]
        self.rows: list = []

    def row(self, name, native_ms, ref_ms, nbytes, streamed: bool = False) -> None:
        """``streamed``: the bytes are mostly streaming stores; floor at that bandwidth."""
        gbs = self.stream_gbs if streamed else self.gbs
        self.rows.append((name, native_ms, ref_ms if ref_ms else "-",
                          f"{ref_ms / native_ms:.0f}x" if ref_ms else "-",
                          f"{nbytes / 1e6:.2f} MB", nbytes / (gbs * 1e9) * 1e3))

    def preprocess(self) -> None:
        model, config, clouds = self.model, self.config, self.clouds
        kept_points = statistics.mean(int(p.num_points.sum()) for p in self.pillars)
        counts = statistics.mean(p.count for p in self.pillars)
        self.row("pillarize", per_frame_ms(model.pillarize, clouds, 5),
                 per_frame_ms(lambda c: reference.pillarize(c, config), clouds, 2),
                 statistics.mean(c.nbytes for c in clouds) + 2 * kept_points * 16
                 + counts * (16 + 8))
        # In a pipeline PFN reads what pillarize just wrote: time it right after pillarize.
        weights = model.split.pfn
        self.row("features + PFN",
                 per_frame_ms(lambda c: model.pfn(model.pillarize(c)), clouds, 5)
                 - per_frame_ms(model.pillarize, clouds, 5),
                 per_frame_ms(lambda p: reference.pfn(p, weights, config), self.pillars, 1),
                 kept_points * 16 + counts * (16 + 64 * 4))

    def scatter(self) -> None:
        config = self.config
        pairs = list(zip(self.features, self.pillars))
        ref = lambda fp: reference.scatter(fp[0], fp[1].coords, fp[1].count, config)  # noqa
        for order in SCATTER_ORDERS:
            kernel = ScatterKernel(config, order).open()
            self.row(f"scatter [64,ny,nx] + clear ({order})",
                     per_frame_ms(lambda fp: kernel(fp[0], fp[1].coords, fp[1].count), pairs, 5),
                     per_frame_ms(ref, pairs, 2) if order == "stream" else None,
                     scatter_bytes(self.pillars, config, order == "stream"), order == "stream")
        if DRIVE.is_dir():
            # Consecutive scans of one (synthetic) drive: neighbouring frames share cells.
            scans = [reference.pillarize(np.fromfile(f, np.float32).reshape(-1, 4), config)
                     for f in sorted(DRIVE.glob("*.bin"))]
            scan_pairs = [(self.features[0], p) for p in scans]
            for order in ("stream", "merged"):
                kernel = ScatterKernel(config, order).open()
                self.row(f"scatter ({order}), {len(scans)} consecutive drive scans",
                         per_frame_ms(lambda fp: kernel(fp[0], fp[1].coords, fp[1].count),
                                      scan_pairs, 5),
                         per_frame_ms(ref, scan_pairs, 2) if order == "stream" else None,
                         scatter_bytes(scans, config, order == "stream"), order == "stream")
        same = [self.pillars[6], self.pillars[6]]
        for order in ("stream", "merged"):
            steady = ScatterKernel(config, order).open()
            self.row(f"scatter ({order}), same frame again", per_frame_ms(
                lambda fp: steady(fp[0], fp[1].coords, fp[1].count), [pairs[6]], 20), None,
                scatter_bytes(same, config, order == "stream"), order == "stream")

    def postprocess(self) -> None:
        model, head, maps, cands = self.model, self.head, self.maps, self.cands
        anchors, cap = model.anchors, self.cap
        map_bytes = statistics.mean(m[0].nbytes for m in maps)
        self.row("decode", per_frame_ms(lambda m: model.decode(*m), maps, 5),
                 per_frame_ms(lambda m: reference.decode_boxes(*m, anchors, head, cap), maps, 2),
                 map_bytes + statistics.mean(c.count for c in cands) * (14 + 2 + 10) * 4)
        self.row("rotated NMS",
                 per_frame_ms(lambda c: model.nms(c.boxes, c.scores, c.count), cands, 5),
                 per_frame_ms(lambda c: reference.nms_bev_rotated(c.boxes, c.scores, c.count,
                                                                  head), cands, 1),
                 statistics.mean(c.count * 7 * 4 for c in cands))
        self.row("decode + NMS", per_frame_ms(lambda m: model.postprocess(*m), maps, 5),
                 per_frame_ms(lambda m: _reference_post(m, model), maps, 1), map_bytes)
        # The random model passes more anchors than a trained one; the same maps with the
        # class logits shifted by -1 show the cost at fewer candidates.
        shifted = [(m[0] - np.float32(1.0), m[1], m[2]) for m in maps]
        fewer = statistics.mean(reference.decode_boxes(*m, anchors, head, cap).count
                                for m in shifted)
        self.row(f"decode + NMS, logits - 1 ({fewer:.0f} cand.)",
                 per_frame_ms(lambda m: model.postprocess(*m), shifted, 5),
                 per_frame_ms(lambda m: _reference_post(m, model), shifted, 1), map_bytes)

    def demo_model(self, scans: list) -> None:
        """decode + NMS of the trained demo model on the drive scans it was made for: the
        candidate counts a trained detector produces (the random model's are a stress case)."""
        model = PointPillars.from_onnx(DEMO_MODEL, PillarConfig(
            self.config.point_cloud_range, self.config.voxel_size, max_pillars=16000)).open()
        maps = [model.runner(model.bev(points)) for points in scans]
        cap = model.head.candidate_capacity(model.config)
        count = statistics.mean(reference.decode_boxes(*m, model.anchors, model.head, cap).count
                                for m in maps)
        self.row(f"decode + NMS, demo model, sample drive ({count:.0f} cand.)",
                 per_frame_ms(lambda m: model.postprocess(*m), maps, 5),
                 per_frame_ms(lambda m: _reference_post(m, model), maps, 1),
                 statistics.mean(m[0].nbytes for m in maps))

    def whole_path(self) -> None:
        model, clouds, maps = self.model, self.clouds, self.maps
        path_bytes = sum(float(r[4].split()[0]) * 1e6 for r in self.rows
                         if r[0] in ("pillarize", "features + PFN", "decode + NMS"))
        path_bytes += scatter_bytes(self.pillars, self.config)
        self.row("whole pre/post path (without backbone)",
                 per_frame_ms(lambda i: (model.bev(clouds[i]), model.postprocess(*maps[i])),
                              range(len(clouds)), 3),
                 per_frame_ms(lambda i: _reference_path(clouds[i], maps[i], model),
                              range(len(clouds)), 1), path_bytes)
        backbone = per_frame_ms(lambda i: model.runner(model.bev(clouds[i])),
                                range(len(clouds)), 1)
        self.rows.append((f"(network after the scatter, {model.runner.runtime}, "
                          f"random 16-ch model)", backbone,
                          "-", "-", "-", "-"))


def sparse_tables(clouds: list) -> None:
    """Dense fp32 vs sparse fp32 vs sparse int8 per stage (see _pillars_sparse): the demo model
    on the sample drive, the random-weight KITTI-grid model on the real KITTI frames. The int8
    files are made here by ``quantize`` (calibrated on 16 frames of a synthetic drive, seed
    2000, that neither model nor benchmark otherwise sees), unless the demo one is shipped."""
    drive = Drive(DRIVE.parents[1])
    scans = [drive.read(k).points for k in range(len(drive))]
    with tempfile.TemporaryDirectory(prefix="cuvil-bench-int8-") as tmp:
        demo_int8, random_int8 = int8_files(Path(tmp))
        rows = stage_rows(DEMO_MODEL, PillarConfig(max_pillars=16000), scans, "demo, drive",
                          demo_int8)
        rows += stage_rows(RANDOM_MODEL, PillarConfig(), clouds, "random, KITTI", random_int8)
    print_table("PointPillars dense fp32 (sparse: false) vs sparse fp32 (true) vs sparse int8, "
                "one thread, ONNX Runtime; ms per frame, wall then CPU (shared machine: compare "
                "the ratios)",
                ["stage (dense | sparse)", "dense ms", "sparse ms", "int8 ms", "sparse x",
                 "int8 x", "dense CPU", "sparse CPU", "int8 CPU", "sparse CPU x", "int8 CPU x",
                 "MACs sparse / dense"], rows)


def int8_files(tmp: Path) -> tuple[Path, Path]:
    """(demo int8 file, random-model int8 file): the shipped demo one when there is one."""
    calib = tmp / "calib"
    make_drive(calib, frames=16, seed=2000)
    paths = []
    for model in (DEMO_MODEL, RANDOM_MODEL):
        shipped = model.with_name(f"{model.stem}.int8.onnx")
        if shipped.is_file():
            paths.append(shipped)
            continue
        data, _ = quantize_model(model, calib, frames=16)
        paths.append(tmp / shipped.name)
        paths[-1].write_bytes(data)
    return paths[0], paths[1]


def main() -> None:
    print_machine()
    if not DATA.is_dir():
        sys.exit(f"no KITTI frames at {DATA}")
    import cv2
    cv2.setNumThreads(1)
    clouds = [np.fromfile(f, np.float32).reshape(-1, 4) for f in sorted(DATA.glob("*.bin"))]
    sparse_tables(clouds)
    if "--sparse-only" in sys.argv[1:]:
        return
    bench = Bench(clouds, PointPillars.from_onnx(RANDOM_MODEL).open(), bandwidth_gbs(),
                  stream_bandwidth_gbs())
    bench.preprocess()
    bench.scatter()
    bench.postprocess()
    drive = Drive(DRIVE.parents[1])
    bench.demo_model([drive.read(k).points for k in range(len(drive))])
    bench.whole_path()
    print(f"KITTI frames: {len(clouds)}, mean {statistics.mean(len(c) for c in clouds):.0f} "
          f"points, {statistics.mean(p.count for p in bench.pillars):.0f} pillars, "
          f"{statistics.mean(c.count for c in bench.cands):.0f} candidates; copy bandwidth "
          f"{bench.gbs:.1f} GB/s, streaming stores {bench.stream_gbs:.1f} GB/s")
    print_table("PointPillars pre/post-processing, one thread (ms per frame)",
                ["kernel", "native ms", "numpy ms", "ratio", "bytes", "floor ms"], bench.rows)


def _reference_post(maps, model):
    head = model.head
    cap = head.candidate_capacity(model.config)
    cand = reference.decode_boxes(*maps, model.anchors, head, cap)
    return reference.nms_bev_rotated(cand.boxes, cand.scores, cand.count, head)


def _reference_path(points, maps, model):
    config = model.config
    pillars = reference.pillarize(points, config)
    features = reference.pfn(pillars, model.split.pfn, config)
    reference.scatter(features, pillars.coords, pillars.count, config)
    return _reference_post(maps, model)


if __name__ == "__main__":
    main()
