"""INT8 for a CUDA-PointPillars model: quantise the network exactly as the sparse path runs it,
then put it back into the model's own layout.

What ONNX Runtime runs for ``pillars.detect`` (``sparse: true``) is ``SparsePlan.rest``: the BEV
part without the first layer (the fused scatter + conv kernel computes it) and without the box /
direction heads (computed at candidate cells), after onnx_rewrite (1x1 deblocks as Conv, the
class conv split over the parts of the concatenated feature map F). That graph is what gets
quantised, calibrated on what it is fed (the fused kernel's output map for each scan), so the
class conv is quantised too and reads the int8 parts; quantising the file's BEV part as exported
had to leave the class conv float (the sparse path must still find it reading F), and its float
1x1 conv over the [128, 248, 216] map with the layout changes around it was a third of what
int8 left (demo model, ORT profile).

The file keeps the CUDA-PointPillars layout and runs dense too: PFN and scatter nodes as they
were, the first layer and the box / direction convs float (the native kernels read their
weights), F re-joined by its Concat for those convs, and the quantised rest between them.
onnx_sparse recognises the int8 class path (computed from F's parts) and peels the same layers.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ..errors import ModelError
from .splice import replace_subgraph


def pillars_part(path):
    """(the rest as the sparse path runs it, the loaded detector, its ORT inputs per frame)."""
    from ..ops.pillars.model import PointPillars

    detector = PointPillars.from_onnx(path, runtime="onnxruntime", sparse=True,
                                      threads=1).open()
    return detector.plan.rest, detector, lambda frame: detector.ort_inputs(frame.points)


def into_layout(model: onnx.ModelProto, detector, quantized: onnx.ModelProto,
                where: str) -> tuple:
    """(``model`` with its BEV part replaced by the quantised rest + the peeled float layers,
    the number of BEV nodes left float for the native kernels)."""
    from ..ops.pillars.onnx_sparse import FUSED_INPUT, plan_bev

    split, head, plan = detector.split, detector.head, detector.plan
    unrewritten = plan_bev(split, head.map_size(detector.config), head.anchors_per_cell, True,
                           rewrite=False).rest
    kept = {n.name for n in unrewritten.graph.node}
    peeled = [n for n in split.bev.graph.node if n.name not in kept]
    # the rest's input Transpose (NHWC fused map -> NCHW) goes: the peeled layer's output,
    # which the Transpose recreated, is the tensor the file's nodes read
    nodes = [n for n in quantized.graph.node
             if not (n.op_type == "Transpose" and list(n.input) == [FUSED_INPUT])]
    if any(FUSED_INPUT in n.input for n in nodes):
        raise ModelError(f"{where}: the quantised network reads '{FUSED_INPUT}' other than "
                         f"through its Transpose")
    produced = {out for node in nodes + peeled for out in node.output}
    wanted = {name for node in nodes + peeled for name in node.input} - produced
    bev_producer = {out: n for n in split.bev.graph.node for out in n.output}
    # F, cut into its parts by onnx_rewrite.split_concat: its Concat again, for the heads
    nodes += [bev_producer[name] for name in sorted(wanted) if name in bev_producer
              and bev_producer[name].op_type == "Concat"]
    graph = helper.make_graph(peeled + nodes, quantized.graph.name, [], [],
                              list(quantized.graph.initializer))
    rewritten = helper.make_model(graph, opset_imports=list(quantized.opset_import))
    rewritten.ir_version = quantized.ir_version
    return replace_subgraph(model, split.bev, rewritten), len(peeled)
