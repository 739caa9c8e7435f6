"""Dense vs sparse PointPillars, stage by stage, side by side in one run (used by pillars.py).

Dense = ``sparse: false`` (the network as exported: scatter into [C, ny, nx], the whole network in
ONNX Runtime). Sparse = ``sparse: true`` (the default): the scatter fused into the first Conv+ReLU
(kernel_conv_scatter), the rest in ORT with the class map and the head feature map as outputs,
the box / direction heads at candidate cells (kernel_head_cells). "sparse, no rewrite" is the
same without onnx_rewrite's 1x1-deblock rewrite (which is a layout matter, not sparsity).

Every variant runs each frame in turn, interleaved within each repetition (the machine is
shared: absolute ms drift with the load, ratios measured this way much less). Figures: mean over
frames of the median over repetitions. MACs: the dense network's convolutions (from ONNX shape
inference) against what the sparse path does (the rest's convolutions, the fused layer's
pillar-taps x C_in x C_out, candidate cells x C_f x (A*7 + A*2)).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from cuvil_perception.ops.pillars import PointPillars
from cuvil_perception.ops.pillars.model import BevRunner
from cuvil_perception.ops.pillars.onnx_sparse import plan_bev


def _shapes(model: onnx.ModelProto) -> dict:
    inferred = shape_inference.infer_shapes(model)
    values = list(inferred.graph.value_info) + list(inferred.graph.output) + \
        list(inferred.graph.input)
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}


def network_macs(model: onnx.ModelProto) -> int:
    """Multiply-accumulates of the Conv and ConvTranspose nodes of ``model`` (static shapes)."""
    shapes = _shapes(model)
    inits = {t.name: t for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose"):
            continue
        weight = numpy_helper.to_array(inits[node.input[1]])
        per_position = int(np.prod(weight.shape[1:]))
        if node.op_type == "Conv":  # each output value: C_in/g x kh x kw MACs
            total += int(np.prod(shapes[node.output[0]])) * per_position
        else:  # each input value feeds C_out/g x kh x kw outputs
            total += int(np.prod(shapes[node.input[0]])) * per_position
    return total


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


def interleaved(variants: dict, frames: list, reps: int) -> dict:
    """name -> mean over frames of the median over ``reps`` of fn(frame) (ms); variants are
    alternated frame by frame inside each repetition."""
    samples = {name: [[] for _ in frames] for name in variants}
    for _ in range(reps):
        for k, frame in enumerate(frames):
            for name, fn in variants.items():
                t0 = time.perf_counter()
                fn(frame)
                samples[name][k].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.mean(statistics.median(s) for s in per)
            for name, per in samples.items()}


def stage_rows(path, config, clouds: list, label: str, reps: int = 5) -> list:
    """Rows (stage, dense ms, sparse ms, dense/sparse) for one model on ``clouds``."""
    dense = PointPillars.from_onnx(path, config, sparse=False).open()
    sparse = PointPillars.from_onnx(path, config, sparse=True).open()
    plain = PointPillars.from_onnx(path, config, sparse=True).open()
    plain.plan = plan_bev(plain.split, plain.head.map_size(config), plain.head.anchors_per_cell,
                          True, rewrite=False)
    plain.runner = BevRunner(plain.plan, plain.heads, "onnxruntime", str(path))
    inputs = {m: [m.bev(c).copy() for c in clouds] for m in (dense, sparse)}
    maps = [dense.runner(x) for x in inputs[dense]]
    pillars = [(sparse.pfn(sparse.pillarize(c)).copy(), sparse.pillarize(c)) for c in clouds]
    pre = [(f, p.coords.copy(), p.count) for f, p in pillars]
    idx = list(range(len(clouds)))
    t = interleaved({
        "pre": lambda i: sparse.pfn(sparse.pillarize(clouds[i])),
        "scatter": lambda i: dense.scatter(*pre[i]),
        "conv_scatter": lambda i: sparse.scatter(*pre[i]),
        "net_dense": lambda i: dense.runner.network(inputs[dense][i]),
        "net_sparse": lambda i: sparse.runner.network(inputs[sparse][i]),
        "heads": lambda i: sparse.runner(inputs[sparse][i]),
        "post": lambda i: dense.postprocess(*maps[i]),
        "stage_dense": lambda i: dense.detect(clouds[i]),
        "stage_sparse": lambda i: sparse.detect(clouds[i]),
        "stage_plain": lambda i: plain.detect(clouds[i]),
    }, idx, reps)
    t["heads"] -= t["net_sparse"]
    macs_dense = network_macs(dense.plan.rest)
    macs_sparse = sparse_macs(sparse, clouds)
    macs_plain = sparse_macs(plain, clouds)
    rows = [
        (f"{label}: pillarize + PFN (same code)", t["pre"], t["pre"], "1.00x", "-"),
        (f"{label}: scatter | fused scatter + first conv", t["scatter"], t["conv_scatter"],
         _ratio(t["scatter"], t["conv_scatter"]), "-"),
        (f"{label}: network in ORT | rest (no first layer, no box/dir heads)", t["net_dense"],
         t["net_sparse"], _ratio(t["net_dense"], t["net_sparse"]), "-"),
        (f"{label}: - | box + dir heads at {_cells(sparse, clouds)} candidate cells", 0.0,
         t["heads"], "-", "-"),
        (f"{label}: decode + NMS (same code)", t["post"], t["post"], "1.00x", "-"),
        (f"{label}: whole stage, sparse without deblock rewrite", t["stage_dense"],
         t["stage_plain"], _ratio(t["stage_dense"], t["stage_plain"]),
         f"{macs_plain / 1e6:.0f} / {macs_dense / 1e6:.0f} M"),
        (f"{label}: WHOLE STAGE (detect)", t["stage_dense"], t["stage_sparse"],
         _ratio(t["stage_dense"], t["stage_sparse"]),
         f"{macs_sparse / 1e6:.0f} / {macs_dense / 1e6:.0f} M"),
    ]
    return rows


def _cells(model: PointPillars, clouds: list) -> str:
    counts = []
    for points in clouds:
        model.detect(points)
        counts.append(model.runner.cells)
    return f"{statistics.mean(counts):.0f}"


def _ratio(dense: float, sparse: float) -> str:
    return f"{dense / sparse:.2f}x" if sparse > 0 else "-"
