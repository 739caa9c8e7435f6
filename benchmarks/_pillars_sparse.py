"""Dense vs sparse PointPillars, fp32 and int8, stage by stage, side by side in one run (used by
pillars.py).

Dense = ``sparse: false`` (the network as exported: scatter into [C, ny, nx], the whole network in
ONNX Runtime). Sparse = ``sparse: true`` (the default): the scatter fused into the first Conv+ReLU
(kernel_conv_scatter), the rest in ORT with the class map and the head feature map as outputs,
the box / direction heads at candidate cells (kernel_head_cells). "sparse without the ORT
rewrites" is the same without onnx_rewrite (1x1 deblock as a Conv, the class conv split over the
concatenated parts): layout matters for ORT, not sparsity, shown apart. int8 = the sparse path
on the model's ``quantize`` file (its own candidate cells, decode + NMS of its own maps).

Every variant runs each frame in turn, interleaved within each repetition (the machine is
shared: absolute ms drift with the load, ratios measured this way much less). Figures: mean over
frames of the median over repetitions. MACs: the dense network's convolutions (from ONNX shape
inference) against what the sparse path does (the rest's convolutions, the fused layer's
pillar-taps x C_in x C_out, candidate cells x C_f x (A*7 + A*2)).
"""

from __future__ import annotations

import statistics

from _util import interleaved, network_macs

from cuvil_perception.ops.pillars import PointPillars
from cuvil_perception.ops.pillars.model import BevRunner
from cuvil_perception.ops.pillars.native_sparse import HeadCellsKernel
from cuvil_perception.ops.pillars.onnx_sparse import plan_bev


def sparse_macs(model: PointPillars, clouds: list) -> float:
    """Mean MACs of the sparse path per frame: rest network + fused layer + candidate heads."""
    plan = model.plan
    rest = network_macs(plan.rest)
    per_frame = []
    cin, cout = plan.conv.channels if plan.conv is not None else (0, 0)
    for points in clouds:
        model.detect(points)
        taps = _taps(model) if plan.conv is not None else 0
        heads = 0
        if plan.heads is not None:
            heads = model.runner.cells * plan.heads.features * \
                (len(plan.heads.box_bias) + len(plan.heads.dir_bias))
        per_frame.append(rest + taps * cin * cout + heads)
    return statistics.mean(per_frame)


def _taps(model: PointPillars) -> int:
    """Pillar-taps of the last frame's fused layer (each one a C_in x C_out matvec)."""
    conv, config = model.plan.conv, model.config
    count = model.pillarize.out.count
    coords = model.pillarize.out.coords[:count]
    (kh, kw), (sy, sx) = conv.kernel, conv.stride
    top, left = conv.pads[:2]
    ho, wo = conv.out_size(config.ny, config.nx)
    total = 0
    for ky in range(kh):
        ty = coords[:, 1] + top - ky
        ok_y = (ty >= 0) & (ty % sy == 0) & (ty // sy < ho)
        for kx in range(kw):
            tx = coords[:, 2] + left - kx
            total += int((ok_y & (tx >= 0) & (tx % sx == 0) & (tx // sx < wo)).sum())
    return total


def stage_rows(path, config, clouds: list, label: str, int8_path=None, reps: int = 5) -> list:
    """Rows (stage, wall ms dense / sparse / int8, ratios to dense, the same in CPU ms, MACs)
    for one model on ``clouds``; ``int8_path``: its int8 file (sparse path), None: no int8
    column."""
    dense = PointPillars.from_onnx(path, config, sparse=False).open()
    sparse = PointPillars.from_onnx(path, config, sparse=True).open()
    plain = PointPillars.from_onnx(path, config, sparse=True).open()
    plain.plan = plan_bev(plain.split, plain.head.map_size(config), plain.head.anchors_per_cell,
                          True, rewrite=False)
    plain.heads = HeadCellsKernel(plain.head.map_size(config), plain.head, plain.plan.heads,
                                  plain.plan.feat_channels).open()
    plain.runner = BevRunner(plain.plan, plain.heads, "onnxruntime", str(path))
    variants = _variants(dense, sparse, clouds, "")
    if int8_path is not None:
        int8 = PointPillars.from_onnx(int8_path, config, sparse=True).open()
        variants.update(_variants(None, int8, clouds, "_int8"))
    variants.update({"stage_dense": lambda i: dense.detect(clouds[i]),
                     "stage_sparse": lambda i: sparse.detect(clouds[i]),
                     "stage_plain": lambda i: plain.detect(clouds[i])})
    wall, cpu = interleaved(variants, list(range(len(clouds))), reps)
    macs_dense = network_macs(dense.plan.rest)
    macs = {"stage_sparse": sparse_macs(sparse, clouds), "stage_plain": sparse_macs(plain, clouds)}
    cells = _cells(sparse, clouds) + (f" | {_cells(int8, clouds)}" if int8_path else "")
    rows = []
    for name, dense_key, sparse_key in (
            ("pillarize + PFN (same code)", "pre", "pre"),
            ("scatter | fused scatter + first conv", "scatter", "conv_scatter"),
            ("network in ORT | rest (no first layer, no box/dir heads)", "net_dense",
             "net_sparse"),
            (f"- | box + dir heads at {cells} candidate cells", None, "heads"),
            ("decode + NMS", "post", "post"),
            ("whole stage, sparse without the ORT rewrites", "stage_dense", "stage_plain"),
            ("WHOLE STAGE (detect)", "stage_dense", "stage_sparse")):
        q_key = f"{sparse_key}_int8" if int8_path is not None and sparse_key != "stage_plain" \
            else None
        mac = f"{macs[sparse_key] / 1e6:.0f} / {macs_dense / 1e6:.0f} M" \
            if sparse_key in macs else "-"
        row = [f"{label}: {name}"]
        for times in (wall, cpu):
            d_ms = times[dense_key] if dense_key else 0.0
            s_ms, q_ms = times[sparse_key], times.get(q_key, 0.0)
            row += [d_ms, s_ms, q_ms if q_key else "-", _ratio(d_ms, s_ms),
                    _ratio(d_ms, q_ms) if q_key else "-"]
        rows.append(tuple(row + [mac]))
    return rows


def _variants(dense, sparse, clouds: list, suffix: str) -> dict:
    """Timed steps of one model (``sparse``; ``dense`` too when given), keys ending in
    ``suffix``; the last step of the sparse one is its whole stage (``stage_sparse``)."""
    pillars = [(sparse.pfn(sparse.pillarize(c)).copy(), sparse.pillarize(c)) for c in clouds]
    pre = [(f, p.coords.copy(), p.count) for f, p in pillars]
    inputs = [sparse.bev(c).copy() for c in clouds]
    outputs = [sparse.runner.network(x) for x in inputs]
    maps = [sparse.runner(x) for x in inputs]
    steps = {
        "pre": lambda i: sparse.pfn(sparse.pillarize(clouds[i])),
        "conv_scatter": lambda i: sparse.scatter(*pre[i]),
        "net_sparse": lambda i: sparse.runner.network(inputs[i]),
        "heads": lambda i: sparse.heads(outputs[i][0], outputs[i][1:]),
        "post": lambda i: sparse.postprocess(*(maps[i] if dense is None else dense_maps[i])),
        "stage_sparse": lambda i: sparse.detect(clouds[i])}
    if dense is not None:
        dense_inputs = [dense.bev(c).copy() for c in clouds]
        dense_maps = [dense.runner(x) for x in dense_inputs]
        steps.update({"scatter": lambda i: dense.scatter(*pre[i]),
                      "net_dense": lambda i: dense.runner.network(dense_inputs[i])})
    return {f"{name}{suffix}": fn for name, fn in steps.items()}


def _cells(model: PointPillars, clouds: list) -> str:
    counts = []
    for points in clouds:
        model.detect(points)
        counts.append(model.runner.cells)
    return f"{statistics.mean(counts):.0f}"


def _ratio(dense: float, sparse: float) -> str:
    return f"{dense / sparse:.2f}x" if sparse > 0 and dense > 0 else "-"
