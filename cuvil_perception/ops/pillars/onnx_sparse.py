"""Peel the sparse ends off the BEV part of a split model (see onnx_split): the first layer,
computed from the pillar features by the fused scatter + conv kernel, and the box and direction
heads, computed natively at candidate cells only.

First layer: the scatter output must feed exactly one Conv (group 1, no dilation, explicit or
zero pads, any kernel and stride) whose output feeds an optional BatchNormalization (folded into
the conv) and then a Relu. The rest of the network then starts from that Relu's output, given
to ONNX Runtime in NHWC ([1, H_out, W_out, C_out], the fused kernel's layout: one cell's channels
are contiguous) through a Transpose that ORT folds into its own layout change.

Heads: the box and direction outputs must each be Transpose(perm 0,2,3,1) of a 1x1 Conv (stride
1, no pads, group 1) that reads the same tensor F as the Conv behind the class output. The rest
then outputs the class map and F ([1, C_f, H, W]) instead of the box and direction maps.

Either part that does not fit keeps its dense form; ``SparsePlan.notes`` says what was peeled,
or why not, one line each (``inspect`` and ``run`` show them). The rest also gets onnx_rewrite's
1x1-deblock rewrite (a layout matter for ORT, not sparsity; reported separately in
benchmarks/pillars.py). ``sparse: false`` leaves the network exactly as exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...compile.lang.types import MAX_LANES
from ...errors import ConfigError
from .onnx_rewrite import rewrite_deblocks, split_concat
from .onnx_split import SplitModel
from .types import CellHeadWeights, ConvLayer

FUSED_INPUT = "fused_conv_nhwc"


class _NoFit(Exception):
    """This part of the model does not fit the sparse pattern (the message says why)."""


@dataclass
class SparsePlan:
    """How the BEV part runs: ``rest`` (ONNX, run by the runtime) between native parts.

    input_name: the rest's single input, [1, C, ny, nx] (dense: the scatter output) or
    [1, H_out, W_out, C_out] (``conv`` peeled: the fused kernel's NHWC output);
    outputs: role -> tensor name, roles "cls" and, with dense heads, "box" + "dir";
    feat: with ``heads`` peeled, the outputs whose channels, concatenated, are the heads' input
    map F [1, C_f, H, W] (one name, or its parts after onnx_rewrite.split_concat), and
    feat_channels their channel counts;
    notes: what was peeled or why not.
    """

    rest: onnx.ModelProto
    input_name: str
    outputs: dict
    conv: ConvLayer | None = None
    heads: CellHeadWeights | None = None
    notes: list = field(default_factory=list)
    feat: list = field(default_factory=list)
    feat_channels: list = field(default_factory=list)


def plan_bev(split: SplitModel, map_size: tuple, anchors_per_cell: int,
             sparse: bool = True, rewrite: bool = True) -> SparsePlan:
    """Peel what fits off ``split.bev`` (nothing when ``sparse`` is False).

    map_size: (H, W) of the head maps; anchors_per_cell: A (the box head must give A*7 values per
    cell, the direction head A*2); rewrite: apply onnx_rewrite to the rest (the benchmark turns
    it off to show what the peeling alone gives)."""
    if not isinstance(sparse, bool):
        raise ConfigError(f"sparse must be True or False, got {sparse!r}")
    if not sparse:
        return SparsePlan(split.bev, split.bev_input, dict(split.outputs),
                          notes=["dense: sparse is off (the network runs as exported)"])
    graph = split.bev.graph
    inits = {t.name: t for t in graph.initializer}
    nodes = list(graph.node)
    notes = []
    try:
        conv, conv_nodes, conv_out = _peel_conv(nodes, inits, split.bev_input, graph)
        notes.append(f"sparse: scatter fused into {_describe_conv(conv, conv_nodes)}")
    except _NoFit as why:
        conv, conv_nodes, conv_out = None, [], None
        notes.append(f"dense first layer: {why}")
    try:
        heads, head_nodes, feat = _peel_heads(nodes, inits, split.outputs, anchors_per_cell,
                                               split.bev, map_size)
        notes.append(f"sparse: box and direction heads (1x1, {heads.features} -> "
                     f"{len(heads.box_bias)} + {len(heads.dir_bias)}) at candidate cells only")
    except _NoFit as why:
        heads, head_nodes, feat = None, [], None
        notes.append(f"dense heads: {why}")
    peeled = {id(n) for n in conv_nodes + head_nodes}
    kept = [n for n in nodes if id(n) not in peeled]
    inp = _rest_input(split, kept, conv, conv_out)
    outputs = {"cls": split.outputs["cls"]}
    values = [o for o in graph.output if o.name == outputs["cls"]]
    if heads is None:
        outputs.update(box=split.outputs["box"], dir=split.outputs["dir"])
        values = list(graph.output)
    else:
        values.append(helper.make_tensor_value_info(feat, TensorProto.FLOAT,
                                                    [1, heads.features, *map_size]))
    rest = _model(split.bev, kept, inp, values, inits)
    parts, counts = ([feat], [heads.features]) if heads is not None else ([], [])
    if rewrite:
        rest, rewrites = rewrite_deblocks(rest)
        if heads is not None:
            rest, parts, counts, split_note = split_concat(rest, feat, heads.features)
            rewrites += [split_note] if split_note else []
        notes += [f"rewritten: {line}" for line in rewrites]
    return SparsePlan(rest, inp.name, outputs, conv, heads, notes, parts, counts)


def _rest_input(split: SplitModel, kept: list, conv: ConvLayer | None, conv_out: str | None):
    """The rest's input: the scatter output, or (first layer peeled) the fused kernel's NHWC
    map, turned NCHW by a Transpose put in front of ``kept``."""
    if conv is None:
        return next(i for i in split.bev.graph.input if i.name == split.bev_input)
    height, width = conv.out_size(*split.dense_shape)
    kept.insert(0, helper.make_node("Transpose", [FUSED_INPUT], [conv_out], perm=[0, 3, 1, 2],
                                    name="cuvil_fused_conv_to_nchw"))
    return helper.make_tensor_value_info(FUSED_INPUT, TensorProto.FLOAT,
                                         [1, height, width, conv.channels[1]])


def _model(source: onnx.ModelProto, nodes: list, inp, outputs: list,
           inits: dict) -> onnx.ModelProto:
    used = {name for node in nodes for name in node.input}
    graph = helper.make_graph(nodes, f"{source.graph.name}_rest", [inp], outputs,
                              [t for name, t in inits.items() if name in used])
    model = helper.make_model(graph, opset_imports=list(source.opset_import),
                              producer_name="cuvil_perception.ops.pillars.onnx_sparse")
    model.ir_version = source.ir_version
    return model


def _consumers(nodes: list, tensor: str) -> list:
    return [n for n in nodes if tensor in n.input]


def _only_consumer(nodes: list, tensor: str, graph, what: str):
    users = _consumers(nodes, tensor)
    if len(users) != 1 or any(o.name == tensor for o in graph.output):
        raise _NoFit(f"{what} '{tensor}' is read by {len(users)} nodes (or is an output)")
    return users[0]


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _weight(node, index: int, inits: dict) -> np.ndarray:
    if index >= len(node.input) or node.input[index] not in inits:
        raise _NoFit(f"node '{node.name}' ({node.op_type}) input {index} is not a stored weight")
    return numpy_helper.to_array(inits[node.input[index]]).astype(np.float64)


def _conv_params(node, inits: dict) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """(weight [O, I, kh, kw], bias [O], stride, pads) of a plain 2-D Conv, else _NoFit."""
    weight = _weight(node, 1, inits)
    if weight.ndim != 4:
        raise _NoFit(f"node '{node.name}' (Conv) is not 2-D")
    bias = _weight(node, 2, inits) if len(node.input) > 2 and node.input[2] else \
        np.zeros(weight.shape[0])
    attrs = _attrs(node)
    if attrs.get("group", 1) != 1:
        raise _NoFit(f"node '{node.name}' (Conv) has group {attrs['group']}")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise _NoFit(f"node '{node.name}' (Conv) has dilations {attrs['dilations']}")
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise _NoFit(f"node '{node.name}' (Conv) uses auto_pad {attrs['auto_pad']}")
    if list(attrs.get("kernel_shape", weight.shape[2:])) != list(weight.shape[2:]):
        raise _NoFit(f"node '{node.name}' (Conv) kernel_shape does not match its weight")
    stride = tuple(int(s) for s in attrs.get("strides", [1, 1]))
    top, left, bottom, right = (int(p) for p in attrs.get("pads", [0, 0, 0, 0]))
    return weight, bias, stride, (top, left, bottom, right)


def _peel_conv(nodes: list, inits: dict, start: str, graph) -> tuple[ConvLayer, list, str]:
    """The first layer (Conv [+ BN] + Relu) after the scatter, its nodes and its output."""
    conv = _only_consumer(nodes, start, graph, "the scatter output")
    if conv.op_type != "Conv":
        raise _NoFit(f"the scatter output feeds '{conv.name}' ({conv.op_type}), not a Conv")
    weight, bias, stride, pads = _conv_params(conv, inits)
    peeled = [conv]
    after = _only_consumer(nodes, conv.output[0], graph, "the conv output")
    if after.op_type == "BatchNormalization":
        weight, bias = _fold_bn(after, inits, weight, bias)
        peeled.append(after)
        after = _only_consumer(nodes, after.output[0], graph, "the batch-norm output")
    if after.op_type != "Relu":
        raise _NoFit(f"'{conv.name}' is followed by '{after.name}' ({after.op_type}), not "
                     f"[BatchNormalization +] Relu")
    peeled.append(after)
    layer = ConvLayer(weight.astype(np.float32), bias.astype(np.float32), stride, pads)
    return layer, peeled, after.output[0]


def _fold_bn(node, inits: dict, weight: np.ndarray, bias: np.ndarray):
    gamma, beta, mean, var = (_weight(node, k, inits) for k in range(1, 5))
    if any(p.shape != (weight.shape[0],) for p in (gamma, beta, mean, var)):
        raise _NoFit(f"node '{node.name}' (BatchNormalization) does not have "
                     f"{weight.shape[0]} channels")
    eps = float(_attrs(node).get("epsilon", 1e-5))
    scale = gamma / np.sqrt(var + eps)
    return weight * scale[:, None, None, None], (bias - mean) * scale + beta


def _describe_conv(conv: ConvLayer, peeled: list) -> str:
    (cin, cout), (kh, kw) = conv.channels, conv.kernel
    names = " + ".join(f"{n.op_type} '{n.name}'" for n in peeled)
    return (f"{names} ({cin} -> {cout}, {kh}x{kw}, stride {conv.stride[0]}x{conv.stride[1]}, "
            f"pads {list(conv.pads)})")


def _head_conv(nodes: list, inits: dict, output: str, role: str):
    """(Conv node, Transpose node) behind a head output: Transpose(0,2,3,1) of a Conv."""
    producer = next((n for n in nodes if output in n.output), None)
    if producer is None or producer.op_type != "Transpose" \
            or list(_attrs(producer).get("perm", [])) != [0, 2, 3, 1]:
        raise _NoFit(f"the {role} output '{output}' is not Transpose(perm 0,2,3,1) of a conv")
    conv = next((n for n in nodes if producer.input[0] in n.output), None)
    if conv is None or conv.op_type != "Conv" or len(_consumers(nodes, conv.output[0])) != 1:
        raise _NoFit(f"the {role} output '{output}' does not come from a Conv read only by "
                     f"its Transpose")
    return conv, producer


def _peel_heads(nodes: list, inits: dict, roles: dict, anchors_per_cell: int,
                bev: onnx.ModelProto, map_size: tuple):
    """CellHeadWeights from the box and dir 1x1 convs, their nodes, and the feature map F."""
    if 9 * anchors_per_cell > MAX_LANES:  # kernel_head_cells keeps a cell's outputs in one vector
        raise _NoFit(f"{anchors_per_cell} anchors per cell give {9 * anchors_per_cell} box and "
                     f"direction values per cell, more than the candidate-cell kernel's "
                     f"{MAX_LANES} lanes")
    found, peeled, feat = {}, [], None
    for role, per_anchor in (("box", 7), ("dir", 2)):
        conv, transpose = _head_conv(nodes, inits, roles[role], role)
        feat = feat or conv.input[0]
        if conv.input[0] != feat:
            raise _NoFit(f"the {role} conv '{conv.name}' reads '{conv.input[0]}', the box "
                         f"conv reads '{feat}'")
        weight, bias, stride, pads = _conv_params(conv, inits)
        if weight.shape[2:] != (1, 1) or stride != (1, 1) or any(pads):
            raise _NoFit(f"the {role} conv '{conv.name}' is not a plain 1x1 convolution")
        if weight.shape[0] != anchors_per_cell * per_anchor:
            raise _NoFit(f"the {role} conv '{conv.name}' gives {weight.shape[0]} values per "
                         f"cell, the head expects {anchors_per_cell * per_anchor}")
        found[role] = (weight[:, :, 0, 0].astype(np.float32), bias.astype(np.float32))
        peeled += [conv, transpose]
    _class_reads(nodes, inits, roles["cls"], feat, bev, map_size)
    if found["box"][0].shape[1] != found["dir"][0].shape[1]:
        raise _NoFit("the box and direction convs read different channel counts")
    weights = CellHeadWeights(*found["box"], *found["dir"])
    return weights, peeled, feat


def _class_reads(nodes: list, inits: dict, output: str, feat: str, bev: onnx.ModelProto,
                 map_size: tuple) -> None:
    """The class output must come from the heads' feature map F: Transpose(0,2,3,1) of a Conv
    reading F, or (an INT8 file, see quantize) a class path computed from F alone or from its
    Concat parts (the class conv quantised, split over the parts by onnx_rewrite.split_concat);
    F must then have the head maps' size (shape inference), as nothing else ties it to them."""
    try:
        conv, _ = _head_conv(nodes, inits, output, "class")
    except _NoFit:
        conv = None
    if conv is not None:
        if conv.input[0] != feat:
            raise _NoFit(f"the class conv '{conv.name}' reads '{conv.input[0]}', the box "
                         f"conv reads '{feat}'")
        return
    sources = {feat}
    concat = next((n for n in nodes if feat in n.output), None)
    if concat is not None and concat.op_type == "Concat":
        sources.update(concat.input)
    if not _reaches(nodes, inits, output, sources):
        raise _NoFit(f"the class output '{output}' is neither a conv of the heads' map "
                     f"'{feat}' nor computed from it alone")
    inferred = onnx.shape_inference.infer_shapes(bev)
    dims = next(([d.dim_value for d in v.type.tensor_type.shape.dim]
                 for v in inferred.graph.value_info if v.name == feat), None)
    if dims is None or dims[0] != 1 or tuple(dims[2:]) != tuple(map_size):
        raise _NoFit(f"the heads' map '{feat}' has shape {dims}, not [1, C, {map_size[0]}, "
                     f"{map_size[1]}]")


def _reaches(nodes: list, inits: dict, output: str, sources: set) -> bool:
    """Whether every path back from ``output`` ends in ``sources`` or stored weights."""
    producer = {out: n for n in nodes for out in n.output}
    stack, seen = [output], set()
    while stack:
        name = stack.pop()
        if name in sources or name in seen or not name:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is None and name not in inits:
            return False
        stack.extend(node.input if node is not None else [])
    return True
