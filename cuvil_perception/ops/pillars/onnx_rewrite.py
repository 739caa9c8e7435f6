"""Rewrites of the BEV network after peeling (onnx_sparse) that let ONNX Runtime keep its blocked
(NCHWc) layout; values equal up to float32 rounding (other summation orders).

1. ``rewrite_deblocks``: 1x1 upsampling blocks of a BEV network into layers ONNX Runtime runs in
its blocked (NCHWc) layout: ConvTranspose 1x1, stride 1 [+ BatchNormalization] [+ Relu]
(PointPillars' first deblock: no pads, no dilation, group 1) is the same map as Conv 1x1 with
the weight transposed ([I, O, 1, 1] -> [O, I, 1, 1]), BN folded in, [+ Relu].

Why: ORT 1.2x has no blocked ConvTranspose, so the deblock cost a layout change of its input plus
a plain ConvTranspose; as a Conv it runs blocked and fused with its Relu (demo model, one thread:
~8 ms -> ~1.4 ms). Same values up to float32 rounding (another summation order).
Tried and dropped: a stride-s deblock (kernel s x s) as a 1x1 conv to C*s*s channels followed by
DepthToSpace(s) - ORT's DepthToSpace is not blocked and cost more than the ConvTranspose saved.

2. ``split_concat``: with the box / direction heads peeled, the class conv is the only reader of
the concatenated feature map; it becomes one conv per concatenated part, summed, and the parts
are the network's outputs (the head kernel reads them where the map would have been). An INT8
file (``quantize``) has the class conv split over the parts already: the map has no reader left
and only the parts are output.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def rewrite_deblocks(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` with every fitting deblock rewritten, and a note per rewrite."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    notes = []
    for node in [n for n in graph.node if n.op_type == "ConvTranspose"]:
        plan = _fits(graph, node, inits)
        if plan is not None:
            notes.append(_rewrite(graph, node, inits, *plan))
    used = {name for n in graph.node for name in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return out, notes


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _single_user(graph, tensor: str):
    users = [n for n in graph.node if tensor in n.input]
    is_output = any(o.name == tensor for o in graph.output)
    return users[0] if len(users) == 1 and not is_output else None


def _fits(graph, node, inits: dict):
    """(BN node or None, Relu node or None) when ``node`` can be rewritten, else None."""
    if node.input[1] not in inits or (len(node.input) > 2 and node.input[2]
                                      and node.input[2] not in inits):
        return None
    weight = numpy_helper.to_array(inits[node.input[1]])
    attrs = _attrs(node)
    kernel = list(weight.shape[2:]) if weight.ndim == 4 else []
    stride = list(attrs.get("strides", [1, 1]))
    if weight.ndim != 4 or kernel != [1, 1] or stride != [1, 1] \
            or attrs.get("group", 1) != 1 or any(attrs.get("pads", [0] * 4)) \
            or any(d != 1 for d in attrs.get("dilations", [1, 1])) \
            or any(attrs.get("output_padding", [0, 0])) or "output_shape" in attrs \
            or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    norm = _single_user(graph, node.output[0])
    if norm is None or norm.op_type != "BatchNormalization" \
            or any(name not in inits for name in norm.input[1:5]):
        norm = None
    last = norm.output[0] if norm is not None else node.output[0]
    relu = _single_user(graph, last)
    return norm, relu if relu is not None and relu.op_type == "Relu" else None


def _rewrite(graph, node, inits: dict, norm, relu) -> str:
    weight = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)  # [I, O, 1, 1]
    cin, cout = weight.shape[:2]
    bias = numpy_helper.to_array(inits[node.input[2]]).astype(np.float64) \
        if len(node.input) > 2 and node.input[2] else np.zeros(cout)
    if norm is not None:
        gamma, beta, mean, var = (numpy_helper.to_array(inits[n]).astype(np.float64)
                                  for n in norm.input[1:5])
        scale = gamma / np.sqrt(var + float(_attrs(norm).get("epsilon", 1e-5)))
        weight = weight * scale[None, :, None, None]
        bias = (bias - mean) * scale + beta
    conv_w = weight.transpose(1, 0, 2, 3)  # [I, O, 1, 1] -> [O, I, 1, 1]
    conv_b = bias
    name = node.name or node.output[0]
    w_name, b_name = f"{name}.as_conv.weight", f"{name}.as_conv.bias"
    graph.initializer.extend([numpy_helper.from_array(conv_w.astype(np.float32), w_name),
                              numpy_helper.from_array(conv_b.astype(np.float32), b_name)])
    final = (relu or norm or node).output[0]
    nodes = [helper.make_node("Conv", [node.input[0], w_name, b_name],
                              [final if relu is None else f"{name}.as_conv.pre"],
                              name=f"{name}.as_conv", kernel_shape=[1, 1])]
    if relu is not None:
        nodes.append(helper.make_node("Relu", [f"{name}.as_conv.pre"], [final],
                                      name=f"{name}.as_conv.relu"))
    at = list(graph.node).index(node)
    for old in (node, norm, relu):
        if old is not None:
            graph.node.remove(old)
    for k, new in enumerate(nodes):
        graph.node.insert(at + k, new)
    parts = " + ".join(n.op_type for n in (node, norm, relu) if n is not None)
    return f"{parts} '{name}' (1x1, {cin} -> {cout}) run as a Conv (blocked layout in ORT)"


def split_concat(model: onnx.ModelProto, feat: str, channels: int) -> tuple:
    """When graph output ``feat`` is Concat(axis=1) of X1..Xn read only by a 1x1 Conv (stride 1,
    no pads, group 1), compute that conv as Conv(X1, W1, b) + Conv(X2, W2) + ... and output
    X1..Xn instead of ``feat`` (the head kernel reads the parts). Returns (model, the parts in
    channel order, their channel counts, a note); unchanged (model, [feat], [channels], "") when
    it does not fit (``channels``: those of ``feat``).

    Why: the concatenated map is never materialised (demo model: a 27 MB copy, its layout
    change for the conv, ~4 ms of ~28 ms CPU); ORT fuses each Add into the following conv."""
    graph = model.graph
    concat = next((n for n in graph.node if feat in n.output), None)
    users = [n for n in graph.node if feat in n.input]
    if concat is None or concat.op_type != "Concat" or _attrs(concat).get("axis") not in (1, -3) \
            or len(users) > 1 or (users and not _plain_1x1(users[0], graph)):
        return model, [feat], [channels], ""
    counts = _channels(model, list(concat.input))
    if counts is None or sum(counts) != channels:
        return model, [feat], [channels], ""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    parts, joined = list(concat.input), " + ".join(str(c) for c in counts)
    if not users:  # an INT8 file (quantize): the class conv is split over the parts already
        out.graph.node.remove(next(n for n in out.graph.node if feat in n.output))
        _outputs_to_parts(out.graph, concat, counts)
        return out, parts, counts, (f"Concat '{concat.name}' not materialised: the heads read "
                                    f"its parts ({joined} channels)")
    conv = users[0]
    _replace_concat_conv(out.graph, concat, conv, {t.name: t for t in graph.initializer}, counts)
    return out, parts, counts, (f"Concat '{concat.name}' + Conv '{conv.name}' run as one 1x1 "
                                f"Conv per part ({joined} channels), summed")


def _plain_1x1(node, graph) -> bool:
    attrs = _attrs(node)
    inits = {t.name for t in graph.initializer}
    return node.op_type == "Conv" and list(attrs.get("kernel_shape", [1, 1])) == [1, 1] \
        and list(attrs.get("strides", [1, 1])) == [1, 1] and not any(attrs.get("pads", [])) \
        and attrs.get("group", 1) == 1 and node.input[1] in inits \
        and (len(node.input) < 3 or not node.input[2] or node.input[2] in inits)


def _channels(model: onnx.ModelProto, names: list) -> list | None:
    """Channel counts of ``names`` from ONNX shape inference (None when one is unknown)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = {v.name: v.type.tensor_type.shape.dim for v in inferred.graph.value_info}
    counts = []
    for name in names:
        shape = dims.get(name)
        if shape is None or len(shape) != 4 or not shape[1].HasField("dim_value"):
            return None
        counts.append(int(shape[1].dim_value))
    return counts


def _replace_concat_conv(graph, concat, conv, inits: dict, channels: list) -> None:
    weight = numpy_helper.to_array(inits[conv.input[1]])
    bias_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    name = conv.name or conv.output[0]
    nodes, total, start = [], None, 0
    for k, (part, count) in enumerate(zip(concat.input, channels)):
        w_name = f"{name}.part{k}.weight"
        graph.initializer.append(numpy_helper.from_array(
            np.ascontiguousarray(weight[:, start:start + count]), w_name))
        start += count
        inputs = [part, w_name] + ([bias_name] if k == 0 and bias_name else [])
        piece = conv.output[0] if len(channels) == 1 else f"{name}.part{k}.out"
        nodes.append(helper.make_node("Conv", inputs, [piece], name=f"{name}.part{k}",
                                      kernel_shape=[1, 1]))
        if total is not None:
            last = k == len(channels) - 1
            summed = conv.output[0] if last else f"{name}.sum{k}"
            nodes.append(helper.make_node("Add", [total, piece], [summed], name=f"{name}.add{k}"))
            piece = summed
        total = piece
    at = list(graph.node).index(concat)
    graph.node.remove(concat)
    graph.node.remove(conv)
    for k, node in enumerate(nodes):
        graph.node.insert(at + k, node)
    _outputs_to_parts(graph, concat, channels)
    used = {n for node in graph.node for n in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _outputs_to_parts(graph, concat, channels: list) -> None:
    """Graph output ``concat``'s output -> its inputs (the parts), with their shapes."""
    feat = [o for o in graph.output if o.name == concat.output[0]]
    for value in feat:
        graph.output.remove(value)
    for part, count in zip(concat.input, channels):
        dims = [d.dim_value for d in feat[0].type.tensor_type.shape.dim] if feat else []
        shape = [1, count] + dims[2:] if len(dims) == 4 else None
        graph.output.append(helper.make_tensor_value_info(part, onnx.TensorProto.FLOAT, shape))
