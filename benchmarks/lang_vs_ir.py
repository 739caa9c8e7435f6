"""Kernel-language ports against the hand-built IR kernels they replaced, side by side.

Per kernel: outputs compared (bitwise), run time (best of interleaved rounds: on a shared
machine the minimum is the least noisy estimate, and only the ratio counts), cold compile, warm
disk load, and source lines (IR generator module vs kernel-language module, code lines without
docstrings, comments, blank lines or imports; ``--lines`` also counts each kernel's own code,
leaving out what is identical in both modules).
The IR versions live in benchmarks/ir_baseline/ (benchmark-only since the port: every kernel of
the package is now written in the language).

Run: ``python benchmarks/lang_vs_ir.py`` (also part of ``benchmarks/compile.py``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_machine, print_table  # noqa: E402
from ir_baseline import (pillars_conv_scatter, pillars_decode, pillars_head_cells,  # noqa: E402
                         pillars_nms, pillars_pfn, pillars_pillarize, pillars_scatter,
                         pillars_scatter_lines, yolo_decode, yolo_nms, yolo_scan)
from ir_baseline import examples as ir_examples  # noqa: E402

from cuvil_perception.compile import cache_clear, examples, get_kernel, registry  # noqa: E402
from cuvil_perception.ops.pillars import kernel_conv_scatter as p_conv  # noqa: E402
from cuvil_perception.ops.pillars import kernel_decode as p_decode  # noqa: E402
from cuvil_perception.ops.pillars import native_sparse  # noqa: E402
from cuvil_perception.ops.pillars.types import ConvLayer  # noqa: E402
from cuvil_perception.ops.pillars import kernel_head_cells as p_head_cells  # noqa: E402
from cuvil_perception.ops.pillars import kernel_nms as p_nms  # noqa: E402
from cuvil_perception.ops.pillars import kernel_pfn as p_pfn  # noqa: E402
from cuvil_perception.ops.pillars import kernel_pillarize as p_pillarize  # noqa: E402
from cuvil_perception.ops.pillars import kernel_scatter as p_scatter  # noqa: E402
from cuvil_perception.ops.pillars import kernel_scatter_lines as p_lines  # noqa: E402
from cuvil_perception.ops.pillars import native as p_native  # noqa: E402
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig  # noqa: E402
from cuvil_perception.ops.pillars.model import PointPillars  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.yolo import kernel_decode, kernel_nms, kernel_scan  # noqa: E402

GRIDS, NC = [(80, 80), (40, 40), (20, 20)], 80
PC, HC = PillarConfig(), HeadConfig()
KITTI = HERE.parents[1] / "shared" / "data" / "kitti_velodyne"
DRIVE = HERE.parent / "datasets" / "sample_drive" / "velodyne_points" / "data"


def kitti_points(rng, index: int = 0) -> np.ndarray:
    """A real KITTI scan (../shared/data) if present, else 20k random points in the range."""
    frames = sorted(KITTI.glob("*.bin"))
    if frames:
        return np.fromfile(frames[index % len(frames)], np.float32).reshape(-1, 4)
    lo, hi = np.array(PC.point_cloud_range[:3]), np.array(PC.point_cloud_range[3:])
    xyz = rng.uniform(lo, hi, (20000, 3))
    return np.concatenate([xyz, rng.uniform(0, 1, (20000, 1))], axis=1).astype(np.float32)


def _pillarize_case(rng):
    scans = [kitti_points(rng, 0), kitti_points(rng, 1)]
    states = {}

    def run(fn, collect=True):  # two frames in turn: persistent buffers are cleared incrementally
        if fn.address not in states:
            kernel = p_native.PillarizeKernel(PC)
            states[fn.address] = kernel
        k = states[fn.address]
        out = []
        for pts in scans:
            fn(pts.ctypes.data, len(pts), *k._addr)
            if collect:
                out += [k.out.voxels.copy(), k.out.coords.copy(), k.out.num_points.copy(),
                        k.out.counts.copy(), k.grid.copy()]
        return out
    return run, scans


def _pfn_case(rng):
    pillars = p_native.PillarizeKernel(PC).open()(kitti_points(rng))
    c = PC.num_features
    weights = rng.normal(0, 0.3, (14, c)).astype(np.float32)
    bias = rng.normal(0, 0.3, c).astype(np.float32)
    out = np.zeros((PC.max_pillars, c), np.float32)
    count = int(pillars.count)

    def run(fn, collect=True):
        fn(pillars.voxels.ctypes.data, pillars.coords.ctypes.data,
           pillars.num_points.ctypes.data, count, weights.ctypes.data, bias.ctypes.data,
           out.ctypes.data)
        if not collect:
            return None
        return [out[:count].copy()]
    return run, pillars


def _scan_case(rng):
    levels = [rng.normal(-6.0, 2.0, (NC, h, w)).astype(np.float32) for h, w in GRIDS]
    table = np.array([a.ctypes.data for a in levels], np.uint64)
    anchors = sum(h * w for h, w in GRIDS)
    outs = [np.zeros(anchors, np.float32), np.zeros(anchors, np.int64)]

    def run(fn, collect=True):
        n = fn(table.ctypes.data, outs[0].ctypes.data, outs[1].ctypes.data, np.float32(-1.5))
        if not collect:
            return None
        return [n, outs[0].copy(), outs[1][:n].copy()]
    return run, levels


def _decode_case(rng):
    box = [rng.normal(0.0, 2.0, (64, h, w)).astype(np.float32) for h, w in GRIDS]
    cls = [rng.normal(-6.0, 2.0, (NC, h, w)).astype(np.float32) for h, w in GRIDS]
    tables = [np.array([a.ctypes.data for a in arrays], np.uint64) for arrays in (box, cls)]
    anchors = sum(h * w for h, w in GRIDS)
    cand = np.sort(rng.choice(anchors, 300, replace=False)).astype(np.int64)
    outs = [np.zeros((anchors, 4), np.float32), np.zeros(anchors, np.float32),
            np.zeros(anchors, np.float32)]

    def run(fn, collect=True):
        m = fn(tables[0].ctypes.data, tables[1].ctypes.data, cand.ctypes.data, len(cand),
               np.float32(0.01), *(o.ctypes.data for o in outs))
        if not collect:
            return None
        return [m] + [o[:m].copy() for o in outs]
    return run, (box, cls)


def _pillars_decode_case(rng):
    spec = p_decode.decode_spec(PC, HC)
    n, k, cap = spec.static["anchors"], spec.static["classes"], spec.static["cap"]
    maps = [rng.normal(-5.0, 1.5, (n, k)).astype(np.float32),
            rng.normal(0.0, 0.5, (n, 7)).astype(np.float32),
            rng.normal(0.0, 1.0, (n, 2)).astype(np.float32),
            rng.uniform(0.5, 4.0, (n, 7)).astype(np.float32)]
    outs = [np.zeros((cap, 7), np.float32), np.zeros(cap, np.float32), np.zeros(cap, np.int32),
            np.zeros(cap, np.int32), np.zeros(2, np.int64)]

    def run(fn, collect=True):
        fn(*(m.ctypes.data for m in maps), *(o.ctypes.data for o in outs))
        m = int(outs[4][0])
        if not collect:
            return None
        return [outs[4].copy()] + [o[:m].copy() for o in outs[:4]]
    return run, maps


def _pillars_nms_case(rng):
    m, pre, post = 1500, HC.nms_pre, HC.nms_post
    boxes = np.zeros((m, 7), np.float32)
    boxes[:, 0] = rng.uniform(0, 40, m)
    boxes[:, 1] = rng.uniform(-20, 20, m)
    boxes[:, 3:6] = rng.uniform([3.0, 1.4, 1.4], [4.5, 1.9, 1.7], (m, 3))
    boxes[:, 6] = rng.uniform(-np.pi, np.pi, m)
    heading = boxes[:, 6].astype(np.float64)
    cos, sin = np.cos(heading), np.sin(heading)
    bufs = [np.zeros(post, np.int32), np.zeros(pre, np.uint8), np.zeros((pre, 12)),
            np.zeros((4, pre)), np.zeros(pre, np.uint8)]

    def run(fn, collect=True):
        kept = fn(boxes.ctypes.data, cos.ctypes.data, sin.ctypes.data, m,
                  *(b.ctypes.data for b in bufs))
        if not collect:
            return None
        return [kept, bufs[0][:kept].copy()]
    return run, boxes


def _scatter_case(order: str):
    """Three KITTI frames in turn through one state per kernel (last frame's cells cleared)."""
    def factory(rng):
        frames = [p_native.PillarizeKernel(PC).open()(kitti_points(rng, k)) for k in range(3)]
        frames = [(f.coords.copy(), int(f.count)) for f in frames]
        features = rng.normal(0, 1, (PC.max_pillars, PC.num_features)).astype(np.float32)
        states = {}

        def run(fn, collect=True):
            if fn.address not in states:
                states[fn.address] = p_native.ScatterKernel(PC, order)
            k = states[fn.address]
            out = []
            for coords, count in frames:
                fn(features.ctypes.data, coords.ctypes.data, count, *k._addr)
                if collect:
                    out += [k.bev.copy(), k.prev_cells.copy(), k.prev_count.copy()]
            return out if collect else None
        return run, (frames, features)
    return factory


CONV = ConvLayer(np.random.default_rng(3).normal(0, 0.12, (64, 64, 3, 3)).astype(np.float32),
                 np.random.default_rng(4).normal(0, 0.3, 64).astype(np.float32), (2, 2),
                 (1, 1, 1, 1))


def _conv_scatter_case(rng):
    pillars = p_native.PillarizeKernel(PC).open()(kitti_points(rng, 0))
    count = int(pillars.count)
    features = rng.normal(0, 1, (PC.max_pillars, PC.num_features)).astype(np.float32)
    states = {}

    def run(fn, collect=True):  # two calls: the second restores and re-reaches cells
        if fn.address not in states:
            states[fn.address] = native_sparse.ConvScatterKernel(PC, CONV)
        k = states[fn.address]
        out = []
        for n in (count, count // 2):
            got = fn(features.ctypes.data, pillars.coords.ctypes.data, n, *k._addr)
            if collect:
                out += [got, k.out.copy(), k.prev[:got].copy()]
        return out if collect else None
    return run, (pillars, features)


def _head_cells_case(rng):
    spec = p_head_cells.head_cells_spec(HC.map_size(PC), HC, (64, 64))
    st = spec.static
    cells, width = st["cells"], st["width"]
    cls = rng.normal(-6.0, 1.5, (cells, st["groups"])).astype(np.float32)
    feats = [rng.normal(0, 1, (64, cells)).astype(np.float32) for _ in range(2)]
    table = np.array([f.ctypes.data for f in feats], np.uint64)
    weights = rng.normal(0, 0.2, (128, width)).astype(np.float32)
    bias = rng.normal(0, 0.2, width).astype(np.float32)
    outs = [np.zeros((cells, st["jb"]), np.float32), np.zeros((cells, st["jd"]), np.float32),
            np.zeros(cells, np.int32)]

    def run(fn, collect=True):
        n = fn(cls.ctypes.data, table.ctypes.data, weights.ctypes.data, bias.ctypes.data,
               *(o.ctypes.data for o in outs))
        if not collect:
            return None
        return [n] + [o.copy() for o in outs]
    return run, (feats, table)


@functools.lru_cache(maxsize=None)
def _demo_heads():
    """The demo model, and its class map and feature parts on the sample drive's first frame
    (~220 candidate cells: the gate over 53568 cells is most of the work)."""
    model = PointPillars.from_onnx(builtin_models_dir() / "pointpillars_cuvil_demo.onnx",
                                   PillarConfig(max_pillars=16000)).open()
    points = np.fromfile(sorted(DRIVE.glob("*.bin"))[0], np.float32).reshape(-1, 4)
    pillars = model.pillarize(points)
    cls_map, *feat = model.runner.network(model.scatter(model.pfn(pillars), pillars.coords,
                                                        pillars.count))
    return model, np.ascontiguousarray(cls_map), [np.ascontiguousarray(f) for f in feat]


def _demo_spec(module):
    model = _demo_heads()[0]
    return module.head_cells_spec(model.head.map_size(model.config), model.head,
                                  model.plan.feat_channels)


def _head_cells_demo_case(rng):
    model, cls_map, feat = _demo_heads()
    k = model.heads
    table = np.array([f.ctypes.data for f in feat], np.uint64)
    outs = [np.zeros_like(k.out.box), np.zeros_like(k.out.dir), np.zeros_like(k.out.cells)]

    def run(fn, collect=True):
        n = fn(cls_map.ctypes.data, table.ctypes.data, k.weights.ctypes.data,
               k.bias.ctypes.data, *(o.ctypes.data for o in outs))
        return [n] + [o.copy() for o in outs] if collect else None
    return run, (feat, table)


def _nms_case(rng):
    n = 400
    xy = rng.uniform(0, 600, (n, 2)).astype(np.float32)
    wh = rng.uniform(5, 120, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    classes = rng.integers(0, 3, n).astype(np.float32)
    work, sup, keep = np.zeros(5 * n, np.float32), np.zeros(n, np.uint8), np.zeros(300, np.int64)

    def run(fn, collect=True):
        kept = fn(boxes.ctypes.data, classes.ctypes.data, n, 7680.0, 0.45, 300,
                  work.ctypes.data, sup.ctypes.data, keep.ctypes.data)
        if not collect:
            return None
        return [kept, keep[:kept].copy()]
    return run, boxes


def _example_case(kind: str):
    """An example kernel on random float32 arrays of its static size."""
    def factory(rng):
        n = {"axpy": examples.AXPY, "sum": examples.SUM}.get(kind, examples.EXP_MAP).static["n"]
        x = rng.uniform(-20, 20, n).astype(np.float32)
        y = rng.uniform(-1, 1, n).astype(np.float32)

        def run(fn, collect=True):
            out = y.copy() if collect else y
            if kind == "sum":
                return [np.float32(fn(x.ctypes.data))] if collect else fn(x.ctypes.data)
            args = (0.75,) if kind == "axpy" else ((2,) if kind == "exp_accumulate" else ())
            fn(x.ctypes.data, out.ctypes.data, *args)
            return [out] if collect else None
        return run, (x, y)
    return factory


def cases():
    """(name, old spec, new spec, case factory, old module, new module) per ported kernel."""
    return [
        ("yolo.scan", yolo_scan.scan_spec(GRIDS, NC), kernel_scan.scan_spec(GRIDS, NC),
         _scan_case, yolo_scan, kernel_scan),
        ("yolo.decode", yolo_decode.decode_spec(GRIDS, (8, 16, 32), NC),
         kernel_decode.decode_spec(GRIDS, (8, 16, 32), NC), _decode_case, yolo_decode,
         kernel_decode),
        ("pillars.pillarize", pillars_pillarize.pillarize_spec(PC), p_pillarize.pillarize_spec(PC),
         _pillarize_case, pillars_pillarize, p_pillarize),
        ("pillars.pfn", pillars_pfn.pfn_spec(PC), p_pfn.pfn_spec(PC), _pfn_case, pillars_pfn,
         p_pfn),
        ("pillars.scatter_lines (stream)", pillars_scatter_lines.scatter_lines_spec(PC, True),
         p_lines.scatter_lines_spec(PC, True), _scatter_case("stream"), pillars_scatter_lines,
         p_lines),
        ("pillars.scatter_lines (lines)", pillars_scatter_lines.scatter_lines_spec(PC, False),
         p_lines.scatter_lines_spec(PC, False), _scatter_case("lines"), None, None),
        ("pillars.scatter (merged)", pillars_scatter.scatter_spec(PC, "merged"),
         p_scatter.scatter_spec(PC, "merged"), _scatter_case("merged"), pillars_scatter,
         p_scatter),
        ("pillars.scatter (pillar)", pillars_scatter.scatter_spec(PC, "pillar"),
         p_scatter.scatter_spec(PC, "pillar"), _scatter_case("pillar"), None, None),
        ("pillars.conv_scatter", pillars_conv_scatter.conv_scatter_spec(PC, CONV),
         p_conv.conv_scatter_spec(PC, CONV), _conv_scatter_case, pillars_conv_scatter, p_conv),
        ("pillars.head_cells (random)",
         pillars_head_cells.head_cells_spec(HC.map_size(PC), HC, (64, 64)),
         p_head_cells.head_cells_spec(HC.map_size(PC), HC, (64, 64)), _head_cells_case,
         pillars_head_cells, p_head_cells),
        ("pillars.head_cells (demo)", _demo_spec(pillars_head_cells), _demo_spec(p_head_cells),
         _head_cells_demo_case, None, None),
        ("pillars.decode", pillars_decode.decode_spec(PC, HC), p_decode.decode_spec(PC, HC),
         _pillars_decode_case, pillars_decode, p_decode),
        ("pillars.nms", pillars_nms.nms_spec(HC), p_nms.nms_spec(HC), _pillars_nms_case,
         pillars_nms, p_nms),
        ("yolo.nms", yolo_nms.nms_spec(), kernel_nms.nms_spec(), _nms_case, yolo_nms,
         kernel_nms),
    ] + [(f"example.{kind}", old, new, _example_case(kind), None, None)
         for kind, old, new in zip(("axpy", "exp_map", "sigmoid_map", "sum", "exp_accumulate"),
                                   ir_examples.ALL, examples.ALL)]


def _top_level(module) -> tuple[str, list]:
    """(source text, top-level statements) of a module, imports and the module docstring left
    out."""
    text = inspect.getsource(module)
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return text, [node for node in body if not isinstance(node, (ast.Import, ast.ImportFrom))]


def _segment(text: str, node) -> str:
    """A top-level statement's source, its decorators included."""
    decorators = [f"@{ast.get_source_segment(text, d)}" for d in
                  getattr(node, "decorator_list", [])]
    return "\n".join(decorators + [ast.get_source_segment(text, node)])


def shared_code(old, new) -> frozenset:
    """Source texts of the top-level statements identical in both modules: the numpy references,
    constants and plain-Python helpers the port kept as they were - code of neither kernel."""
    texts = [{_segment(text, node) for node in nodes}
             for text, nodes in (_top_level(old), _top_level(new))]
    return frozenset(texts[0] & texts[1])


def code_lines(module, leave_out: frozenset = frozenset()) -> int:
    """Lines of code of a kernel module (helpers and spec function included): no docstrings,
    comments, blank lines or imports; top-level statements whose source text is in
    ``leave_out`` are not counted."""
    text, nodes = _top_level(module)
    counted, skip = set(), set()
    for top in nodes:
        if _segment(text, top) in leave_out:
            continue
        first = min([top.lineno] + [d.lineno for d in getattr(top, "decorator_list", [])])
        counted.update(range(first, top.end_lineno + 1))
        for node in ast.walk(top):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                    isinstance(getattr(body[0], "value", None), ast.Constant):
                skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = text.splitlines()
    return sum(1 for k in counted - skip
               if lines[k - 1].strip() and not lines[k - 1].strip().startswith("#"))


def _time(fn, runs: int) -> float:
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - t0) / runs * 1e3


def _compile_times(spec) -> tuple[float, float]:
    cold, warm = [], []
    for _ in range(3):
        registry.clear_memory()
        cache_clear()
        cold.append(registry.acquire(spec).compile_ms)
        registry.clear_memory()
        t0 = time.perf_counter()
        registry.acquire(spec)
        warm.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(cold)), float(np.median(warm))


def compare(rounds: int = 15, runs: int = 40, only: str = "") -> list:
    """Check outputs and time each pair (``only``: names containing it); prints the table and
    returns its rows."""
    rng = np.random.default_rng(12)
    rows = []
    for name, old_spec, new_spec, factory, old_src, new_src in cases():
        if only not in name:
            continue
        old, new = get_kernel(old_spec), get_kernel(new_spec)
        run, _keep = factory(rng)
        same = all(np.array_equal(a, b) for a, b in zip(run(old), run(new)))
        t_old, t_new = [], []
        for _ in range(rounds):  # interleaved: both see the same machine load
            t_old.append(_time(lambda: run(old, False), runs))
            t_new.append(_time(lambda: run(new, False), runs))
        cold_old, warm_old = _compile_times(old_spec)
        cold_new, warm_new = _compile_times(new_spec)
        lo, ln = (code_lines(old_src), code_lines(new_src)) if old_src else ("", "")
        mo, mn = min(t_old), min(t_new)
        rows.append((name, "yes" if same else "NO", mo, mn, mn / mo, cold_old, cold_new,
                     warm_old, warm_new, lo, ln))
    print_table("kernel language vs hand-built IR (run ms: best round, per call; "
                "compile ms: median of 3)",
                ["kernel", "bitwise", "IR ms", "lang ms", "lang/IR", "IR cold", "lang cold",
                 "IR warm", "lang warm", "IR lines", "lang lines"], rows)
    return rows


def line_counts() -> list:
    """Source lines of every ported kernel module against its IR predecessor, and the total;
    prints the table and returns its rows. Two counts (code lines as in `code_lines`): the
    whole modules, and each kernel's own code - the modules less the top-level statements that
    are identical in both (`shared_code`: numpy references, constants, helpers neither kernel
    changed)."""
    pairs = {}
    for name, _old, _new, _factory, old_src, new_src in cases():
        if old_src is not None and "not switched" not in name:
            pairs[new_src.__name__] = (name.split(" ")[0], old_src, new_src)
    pairs["examples"] = ("compile.examples", ir_examples, examples)
    rows = []
    for name, old, new in pairs.values():
        shared = shared_code(old, new)
        rows.append([name, code_lines(old), code_lines(new), code_lines(old, shared),
                     code_lines(new, shared)])
    rows.append(["total"] + [sum(r[k] for r in rows) for k in range(1, 5)])
    rows = [(name, ir, lang, f"{lang / ir:.3f}", own_ir, own_lang, f"{own_lang / own_ir:.3f}")
            for name, ir, lang, own_ir, own_lang in rows]
    print_table("source lines: kernel language port vs its hand-built IR predecessor "
                "(own: less the code identical in both)",
                ["kernel module", "IR lines", "lang lines", "lang/IR", "own IR", "own lang",
                 "own lang/IR"], rows)
    return rows


if __name__ == "__main__":
    import argparse
    import os
    import shutil
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="kernels whose name contains this")
    parser.add_argument("--lines", action="store_true", help="only the source-line table")
    opts = parser.parse_args()
    print_machine()
    cache = tempfile.mkdtemp(prefix="cuvil-bench-cache-")
    os.environ["CUVIL_CACHE_DIR"] = cache
    try:
        if not opts.lines:
            compare(only=opts.only)
        line_counts()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
