"""The project's native kernels beside their numba twins (_numba_twins.py, _numba_twins_bev.py,
_numba_pillarize.py; benchmark only, see vs_numba.py): ``project_cases(scans)`` gives one
vs_numba.Case per kernel.
Ours is called as its op calls it: the bare callable of ``get_kernel(spec)`` (or the op's own
bound kernel) with precomputed addresses. Inputs come from _cases.py: the
KITTI scans where points go in, seeded random head maps elsewhere."""

from __future__ import annotations

import numpy as np

import _numba_twins as tw
import _numba_twins_bev as bt
from _cases import CONV, GRIDS, HC, NC, PC, demo_heads

from cuvil_perception.compile import get_kernel
from cuvil_perception.ops.pillars import kernel_decode as p_decode
from cuvil_perception.ops.pillars import kernel_nms as p_nms
from cuvil_perception.ops.pillars import native, native_sparse
from cuvil_perception.ops.yolo import kernel_decode, kernel_nms, kernel_scan

# Kernels whose twin rounds differently: ours uses the polynomial f32 exp (<= 1.5e-7 relative)
# where numba calls libm's expf, or fuses other multiply-adds. Compared within this tolerance.
CLOSE = {"yolo.decode": 1e-5, "pillars.decode": 1e-5, "pillars.pfn": 1e-5,
         "pillars.conv_scatter": 1e-5}


def _addr(*arrays) -> list[int]:
    return [a.ctypes.data for a in arrays]


def _pillarize_case(Case, scans):
    import _numba_pillarize as nk

    ours, state = native.PillarizeKernel(PC).open(), nk.make_state()

    def run_ours(pts):
        out = ours(pts)
        count = int(out.counts[0])
        return [count, out.voxels[:count], out.num_points[:count]]

    def run_numba(pts):
        count = nk.run(pts, state)
        return [count, state[0][:count], state[1][:count]]
    return Case("pillars.pillarize", scans, run_ours, run_numba)


def _yolo_cases(Case):
    rng = np.random.default_rng(0)
    fn = get_kernel(kernel_scan.scan_spec(GRIDS, NC))
    levels = [rng.normal(-6.0, 2.0, (NC, h * w)).astype(np.float32) for h, w in GRIDS]
    table = np.array(_addr(*levels), np.uint64)
    anchors = sum(h * w for h, w in GRIDS)
    outs = [[np.zeros(anchors, np.float32), np.zeros(anchors, np.int64)] for _ in range(2)]

    def scan_ours(_):
        n = fn(table.ctypes.data, *_addr(*outs[0]), np.float32(-1.5))
        return [n, outs[0][1][:n]]

    def scan_numba(_):
        n = tw.yolo_scan(tuple(levels), *outs[1], np.float32(-1.5))
        return [n, outs[1][1][:n]]

    box = [rng.normal(0.0, 2.0, (64, h * w)).astype(np.float32) for h, w in GRIDS]
    cls = [rng.normal(-6.0, 2.0, (NC, h * w)).astype(np.float32) for h, w in GRIDS]
    tables = [np.array(_addr(*arrays), np.uint64) for arrays in (box, cls)]
    cand = np.sort(rng.choice(anchors, 300, replace=False)).astype(np.int64)
    dec = get_kernel(kernel_decode.decode_spec(GRIDS, (8, 16, 32), NC))
    douts = [[np.zeros((anchors, 4), np.float32), np.zeros(anchors, np.float32),
              np.zeros(anchors, np.float32)] for _ in range(2)]
    widths, strides = tuple(w for _, w in GRIDS), (8.0, 16.0, 32.0)

    def decode_ours(_):
        m = dec(*_addr(*tables, cand), len(cand), np.float32(0.01), *_addr(*douts[0]))
        return [m] + [o[:m] for o in douts[0]]

    def decode_numba(_):
        m = tw.yolo_decode(tuple(box), tuple(cls), widths, strides, cand, len(cand),
                           np.float32(0.01), *douts[1])
        return [m] + [o[:m] for o in douts[1]]

    n = 400
    xy = rng.uniform(0, 600, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 120, (n, 2))], axis=1).astype(np.float32)
    classes = rng.integers(0, 3, n).astype(np.float32)
    nms = get_kernel(kernel_nms.nms_spec())
    scratch = [[np.zeros((5, n), np.float32), np.zeros(n, np.uint8), np.zeros(300, np.int64)]
               for _ in range(2)]

    def nms_ours(_):
        kept = nms(*_addr(boxes, classes), n, 7680.0, 0.45, 300, *_addr(*scratch[0]))
        return [kept, scratch[0][2][:kept]]

    def nms_numba(_):
        kept = tw.yolo_nms(boxes, classes, n, np.float32(7680.0), 0.45, 300, *scratch[1])
        return [kept, scratch[1][2][:kept]]
    return [Case("yolo.scan", [0], scan_ours, scan_numba),
            Case("yolo.decode (300 candidates)", [0], decode_ours, decode_numba),
            Case("yolo.nms (400 boxes)", [0], nms_ours, nms_numba)]


def _pillars_head_cases(Case):
    rng = np.random.default_rng(1)
    spec = p_decode.decode_spec(PC, HC)
    st = spec.static
    n, k, cap = st["anchors"], st["classes"], st["cap"]
    maps = [rng.normal(-5.0, 1.5, (n, k)).astype(np.float32),
            rng.normal(0.0, 0.5, (n, 7)).astype(np.float32),
            rng.normal(0.0, 1.0, (n, 2)).astype(np.float32),
            rng.uniform(0.5, 4.0, (n, 7)).astype(np.float32)]
    outs = [[np.zeros((cap, 7), np.float32), np.zeros(cap, np.float32), np.zeros(cap, np.int32),
             np.zeros(cap, np.int32), np.zeros(2, np.int64)] for _ in range(2)]
    dec, flags = get_kernel(spec), np.zeros(p_decode.BLOCK, np.uint8)

    def decode_ours(_):
        dec(*_addr(*maps, *outs[0]))
        m = int(outs[0][4][0])
        return [outs[0][4]] + [o[:m] for o in outs[0][:4]]

    def decode_numba(_):
        tw.pillars_decode(*maps, *outs[1], flags, np.float32(st["threshold"]),
                          np.float32(st["dir_offset"]), np.float32(st["gate"]))
        m = int(outs[1][4][0])
        return [outs[1][4]] + [o[:m] for o in outs[1][:4]]

    m, pre, post = 1500, HC.nms_pre, HC.nms_post
    boxes = np.zeros((m, 7), np.float32)
    boxes[:, 0], boxes[:, 1] = rng.uniform(0, 40, m), rng.uniform(-20, 20, m)
    boxes[:, 3:6] = rng.uniform([3.0, 1.4, 1.4], [4.5, 1.9, 1.7], (m, 3))
    boxes[:, 6] = rng.uniform(-np.pi, np.pi, m)
    cos, sin = np.cos(boxes[:, 6].astype(np.float64)), np.sin(boxes[:, 6].astype(np.float64))
    bufs = [[np.zeros(post, np.int32), np.zeros(pre, np.uint8), np.zeros((pre, 12)),
             np.zeros((4, pre)), np.zeros(pre, np.uint8)] for _ in range(2)]
    nms, verts = get_kernel(p_nms.nms_spec(HC)), np.zeros((4, p_nms.MAX_VERTS))

    def nms_ours(_):
        kept = nms(*_addr(boxes, cos, sin), m, *_addr(*bufs[0]))
        return [kept, bufs[0][0][:kept]]

    def nms_numba(_):
        kept = tw.pillars_nms(boxes, cos, sin, m, *bufs[1], verts, HC.nms_threshold)
        return [kept, bufs[1][0][:kept]]
    return [Case("pillars.decode", [0], decode_ours, decode_numba),
            Case("pillars.nms (1500 boxes)", [0], nms_ours, nms_numba)]


def _pfn_case(Case, frames):
    rng = np.random.default_rng(2)
    c = PC.num_features
    weights = rng.normal(0, 0.3, (14, c)).astype(np.float32)
    bias = rng.normal(0, 0.3, c).astype(np.float32)
    outs = [np.zeros((PC.max_pillars, c), np.float32) for _ in range(2)]
    spec = native.pfn_spec(PC)
    fn, st = get_kernel(spec), spec.static
    voxel, offset = np.float32(st["voxel"]), np.float32(st["offset"])

    def ours(frame):
        p, count = frame
        fn(*_addr(p.voxels, p.coords, p.num_points), count, *_addr(weights, bias, outs[0]))
        return [outs[0][:count]]

    def numba(frame):
        p, count = frame
        bt.pillars_pfn(p.voxels, p.coords, p.num_points, count, weights, bias, outs[1],
                       voxel, offset)
        return [outs[1][:count]]
    return Case("pillars.pfn", frames, ours, numba)


def _scatter_cases(Case, frames):
    rng = np.random.default_rng(3)
    features = rng.normal(0, 1, (PC.max_pillars, PC.num_features)).astype(np.float32)
    cases = []
    for order in ("stream", "merged"):
        ours, theirs = native.ScatterKernel(PC, order), native.ScatterKernel(PC, order)
        fn = get_kernel(ours.spec)
        twin = bt.pillars_scatter_lines if order == "stream" else bt.pillars_scatter
        extra = (theirs.union[0], theirs.union[1]) if order == "stream" else ()
        bev = theirs.bev.reshape(PC.num_features, -1)

        def run_ours(frame, ours=ours, fn=fn):
            p, count = frame
            fn(*_addr(features, p.coords), count, *ours._addr)
            return [ours.bev]

        def run_numba(frame, theirs=theirs, twin=twin, extra=extra, bev=bev):
            p, count = frame
            twin(features, p.coords, count, bev, theirs.prev_cells, theirs.prev_count,
                 theirs.bitmap, theirs.cell_pillar, theirs.cells, theirs.pids, *extra, PC.nx)
            return [theirs.bev]
        name = "pillars.scatter_lines (stream)" if order == "stream" else \
            "pillars.scatter (merged)"
        cases.append(Case(name, frames, run_ours, run_numba))
    return cases


def _conv_scatter_case(Case, frames):
    rng = np.random.default_rng(4)
    features = rng.normal(0, 1, (PC.max_pillars, PC.num_features)).astype(np.float32)
    ours, theirs = (native_sparse.ConvScatterKernel(PC, CONV) for _ in range(2))
    fn = get_kernel(ours.spec)
    st = ours.spec.static
    geometry = tuple(st[k] for k in ("kh", "kw", "sy", "sx", "top", "left", "ho", "wo"))
    out2, total = theirs.out.reshape(-1, st["cout"]), np.zeros(st["cout"], np.float32)

    def run_ours(frame):
        p, count = frame
        n = fn(*_addr(features, p.coords), count, *ours._addr)
        return [n, ours.out]

    def run_numba(frame):
        p, count = frame
        n = bt.pillars_conv_scatter(features, p.coords, count, theirs.weights, theirs.bias,
                                    out2, theirs.mark, theirs.touched, theirs.prev,
                                    theirs.prev_count, total, geometry)
        return [n, theirs.out]
    return Case("pillars.conv_scatter", frames, run_ours, run_numba)


def _head_cells_case(Case):
    model, cls_map, feat = demo_heads()
    k = model.heads
    st = k.spec.static
    fn = get_kernel(k.spec)
    table = np.array(_addr(*feat), np.uint64)
    outs = [[np.zeros_like(k.out.box), np.zeros_like(k.out.dir), np.zeros_like(k.out.cells)]
            for _ in range(2)]
    acc, gate = np.zeros(st["width"], np.float32), np.float32(st["gate"])
    anchors = model.head.anchors_per_cell
    cls2 = cls_map.reshape(st["cells"], st["groups"])
    parts = tuple(f.reshape(-1, st["cells"]) for f in feat)  # [C_k, cells] each

    def run_ours(_):
        n = fn(*_addr(cls_map, table, k.weights, k.bias, *outs[0]))
        return [n, outs[0][2][:n]] + [o[outs[0][2][:n]] for o in outs[0][:2]]

    def run_numba(_):
        n = bt.pillars_head_cells(cls2, parts, k.weights, k.bias, *outs[1], acc, anchors, gate)
        return [n, outs[1][2][:n]] + [o[outs[1][2][:n]] for o in outs[1][:2]]
    return Case("pillars.head_cells (demo frame)", [0], run_ours, run_numba)


def project_cases(scans) -> list:
    import vs_numba

    def Case(name, *args):  # noqa: N802 (the Case of vs_numba, with this kernel's tolerance)
        tolerance = next((t for key, t in CLOSE.items() if name.startswith(key)), 0.0)
        return vs_numba.Case(name, *args, tolerance=tolerance)

    pillarize = native.PillarizeKernel(PC).open()
    frames = []
    for pts in scans:  # each frame's pillars, copied out of the persistent buffers
        out = pillarize(pts)
        count = int(out.counts[0])
        frames.append((type(out)(out.voxels.copy(), out.coords.copy(), out.num_points.copy(),
                                 out.counts.copy()), count))
    return [_pillarize_case(Case, scans), _pfn_case(Case, frames),
            *_scatter_cases(Case, frames), _conv_scatter_case(Case, frames),
            _head_cells_case(Case), *_pillars_head_cases(Case), *_yolo_cases(Case)]
