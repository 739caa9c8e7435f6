"""Find the Detect head in an ultralytics YOLOv8 ONNX export and cut it before the decode.

What is matched (structurally; node names change with ``simplify`` and are never relied on):

    output0 = Concat(axis=1)( <box decode>, Sigmoid(<class logits over levels>) )

- the box decode contains the DFL ``Softmax``; walking back from its input through layout ops
  (Reshape, Transpose, Split, Slice, ...) reaches the ``Concat`` over pyramid levels;
- walking back from the ``Sigmoid`` input the same way reaches the class ``Concat`` over levels;
- ultralytics 8.4 ("split"): two different level Concats whose inputs are (reshaped) ``Conv``
  outputs with 4*reg_max and nc channels;
- ultralytics 8.1-8.3 ("fused"): one level Concat whose inputs are (reshaped) per-level
  ``Concat(axis=1)(box Conv, class Conv)``.

The cut model keeps the trunk and the per-level raw convolutions and outputs, per level i,
``box{i}`` float32 [1, 4*reg_max, h_i, w_i] and ``cls{i}`` float32 [1, nc, h_i, w_i] (logits).
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import shape_inference

from ...errors import ModelError
from ..onnx_shapes import value_dims

REG_MAX = 16
_LAYOUT_OPS = {"Reshape", "Transpose", "Split", "Slice", "Identity", "Flatten", "Squeeze",
               "Unsqueeze"}
_EXPECTED = ("an ultralytics YOLOv8 detect export (`yolo export format=onnx`, dynamic=False): one "
             "input [1, 3, H, W] with H, W multiples of 32 and one output [1, 4 + nc, A]")


class HeadNotCuttable(Exception):
    """The model's output is a YOLOv8 detect output but its head pattern is not recognised."""


@dataclass(frozen=True)
class ModelInfo:
    """What the export's interface says: input name and size (pixels), class count, anchors."""

    input_name: str
    input_hw: tuple[int, int]
    output_name: str
    nc: int
    n_anchors: int


@dataclass(frozen=True)
class HeadLayout:
    """The per-level raw outputs of the Detect head (tensor names) and their static geometry."""

    box_tensors: tuple[str, ...]
    cls_tensors: tuple[str, ...]
    grids: tuple[tuple[int, int], ...]  # (h, w) cells per level, levels in anchor order
    strides: tuple[float, ...]          # input pixels per cell, per level
    style: str                          # "split" (8.4) or "fused" (8.1-8.3)
    nc: int                             # classes


def load_model(path: Path) -> onnx.ModelProto:
    """Read an ONNX file; ModelError naming the file if it cannot be parsed."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file")
    try:
        return onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError and friends
        raise ModelError(f"{path}: not a readable ONNX file ({exc})") from exc


def class_names(model: onnx.ModelProto) -> tuple[str, ...] | None:
    """Class names from an ultralytics export's ``names`` metadata (a Python dict literal such as
    ``{0: 'person', 1: 'bicycle'}``), in class-id order; None when absent or unreadable."""
    text = {p.key: p.value for p in model.metadata_props}.get("names")
    try:
        names = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    if not isinstance(names, dict) or sorted(names) != list(range(len(names))):
        return None
    return tuple(str(names[i]) for i in range(len(names)))


def inspect_interface(model: onnx.ModelProto, where: str) -> ModelInfo:
    """Check the input/output signature of a YOLOv8 detect export; ModelError saying what is
    expected otherwise."""
    task = {p.key: p.value for p in model.metadata_props}.get("task")
    if task is not None and task != "detect":
        raise ModelError(f"{where}: ultralytics task is '{task}'; expected {_EXPECTED}")
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise ModelError(f"{where}: has {len(inputs)} inputs and {len(model.graph.output)} "
                         f"outputs; expected {_EXPECTED}")
    in_dims, out_dims = value_dims(inputs[0]), value_dims(model.graph.output[0])
    if len(in_dims) != 4 or in_dims[1] != 3 or in_dims[0] not in (1, None):
        raise ModelError(f"{where}: input '{inputs[0].name}' has shape {in_dims}; "
                         f"expected {_EXPECTED}")
    h, w = in_dims[2], in_dims[3]
    if not isinstance(h, int) or not isinstance(w, int) or h % 32 or w % 32:
        raise ModelError(f"{where}: input size {h}x{w} is not a static multiple of 32; "
                         f"expected {_EXPECTED}")
    anchors = sum((h // s) * (w // s) for s in (8, 16, 32))
    if len(out_dims) != 3 or not isinstance(out_dims[1], int) or out_dims[1] < 5 or \
            out_dims[2] not in (anchors, None):
        raise ModelError(f"{where}: output '{model.graph.output[0].name}' has shape {out_dims}; "
                         f"expected [1, 4 + nc, {anchors}] for a {h}x{w} input "
                         f"({_EXPECTED})")
    return ModelInfo(inputs[0].name, (h, w), model.graph.output[0].name, out_dims[1] - 4, anchors)


class _Graph:
    """Producer lookup over a model's nodes."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.producer = {out: node for node in model.graph.node for out in node.output}

    def op(self, tensor: str) -> onnx.NodeProto | None:
        return self.producer.get(tensor)

    def through_layout(self, tensor: str) -> str:
        """Walk back through layout-only ops (first input) until something else produces it."""
        node = self.op(tensor)
        while node is not None and node.op_type in _LAYOUT_OPS:
            tensor = node.input[0]
            node = self.op(tensor)
        return tensor

    def find_ancestor(self, tensor: str, op_type: str, limit: int = 64) -> onnx.NodeProto | None:
        """Nearest node of ``op_type`` above ``tensor`` (breadth first, at most ``limit`` nodes)."""
        queue, seen = deque([tensor]), set()
        while queue and len(seen) < limit:
            node = self.op(queue.popleft())
            if node is None or node.name + node.output[0] in seen:
                continue
            seen.add(node.name + node.output[0])
            if node.op_type == op_type:
                return node
            queue.extend(node.input)
        return None


def find_head(model: onnx.ModelProto, info: ModelInfo) -> HeadLayout:
    """Locate the per-level raw convolutions; HeadNotCuttable saying why if the pattern differs."""
    g = _Graph(model)
    final = g.op(info.output_name)
    if final is None or final.op_type != "Concat" or len(final.input) != 2:
        raise HeadNotCuttable("output0 is not Concat(box, scores)")
    sig = g.op(final.input[1])
    if sig is None or sig.op_type != "Sigmoid":
        raise HeadNotCuttable("the scores are not a Sigmoid")
    softmax = g.find_ancestor(final.input[0], "Softmax")
    if softmax is None:
        raise HeadNotCuttable("no DFL Softmax above the box output")
    box_cat = g.op(g.through_layout(softmax.input[0]))
    cls_cat = g.op(g.through_layout(sig.input[0]))
    if box_cat is None or cls_cat is None or "Concat" != box_cat.op_type != cls_cat.op_type:
        raise HeadNotCuttable("no Concat over pyramid levels above the DFL and the Sigmoid")
    if box_cat is cls_cat:
        style, boxes, classes = "fused", [], []
        for level in box_cat.input:
            pair = g.op(g.through_layout(level))
            if pair is None or pair.op_type != "Concat" or len(pair.input) != 2:
                raise HeadNotCuttable("a level is not Concat(box conv, class conv)")
            boxes.append(pair.input[0])
            classes.append(pair.input[1])
    else:
        style = "split"
        boxes = [g.through_layout(t) for t in box_cat.input]
        classes = [g.through_layout(t) for t in cls_cat.input]
    if len(boxes) != len(classes) or not boxes:
        raise HeadNotCuttable("box and class branches have different level counts")
    for tensor in boxes + classes:
        node = g.op(tensor)
        if node is None or node.op_type != "Conv":
            raise HeadNotCuttable(f"level tensor '{tensor}' is not a Conv output")
    shapes = _conv_shapes(model, boxes + classes)
    return _layout(boxes, classes, shapes, info, style)


def _conv_shapes(model: onnx.ModelProto, tensors: list[str]) -> dict[str, list]:
    """Static shapes of ``tensors`` from ONNX shape inference."""
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception as exc:  # inference failure means we cannot bake a static grid
        raise HeadNotCuttable(f"shape inference failed ({exc})") from exc
    known = {v.name: value_dims(v) for v in inferred.graph.value_info}
    missing = [t for t in tensors if t not in known or None in known[t] or len(known[t]) != 4]
    if missing:
        raise HeadNotCuttable(f"no static shape for {missing[0]}")
    return {t: known[t] for t in tensors}


def _layout(boxes: list[str], classes: list[str], shapes: dict, info: ModelInfo,
            style: str) -> HeadLayout:
    grids, strides = [], []
    for b, c in zip(boxes, classes):
        (_, cb, hb, wb), (_, cc, hc, wc) = shapes[b], shapes[c]
        if cb != 4 * REG_MAX or cc != info.nc or (hb, wb) != (hc, wc):
            raise HeadNotCuttable(f"level convs have {cb} and {cc} channels; expected "
                                  f"{4 * REG_MAX} and {info.nc}")
        if info.input_hw[0] % hb or info.input_hw[0] // hb != info.input_hw[1] / wb:
            raise HeadNotCuttable(f"grid {hb}x{wb} does not divide the input evenly")
        grids.append((hb, wb))
        strides.append(float(info.input_hw[0] // hb))
    if sum(h * w for h, w in grids) != info.n_anchors:
        raise HeadNotCuttable("level grids do not add up to the output's anchor count")
    return HeadLayout(tuple(boxes), tuple(classes), tuple(grids), tuple(strides), style,
                      info.nc)


def cut_model(model: onnx.ModelProto, layout: HeadLayout) -> onnx.ModelProto:
    """The trunk plus the raw head convolutions; outputs box0, cls0, box1, cls1, ... (renamed)."""
    wanted = [t for pair in zip(layout.box_tensors, layout.cls_tensors) for t in pair]
    g = _Graph(model)
    keep, stack = set(), list(wanted)
    while stack:
        node = g.op(stack.pop())
        if node is None or id(node) in keep:
            continue
        keep.add(id(node))
        stack.extend(node.input)
    nodes = [n for n in model.graph.node if id(n) in keep]
    used = {t for n in nodes for t in n.input}
    inits = [t for t in model.graph.initializer if t.name in used]
    rename = {}
    for i, (b, c) in enumerate(zip(layout.box_tensors, layout.cls_tensors)):
        rename[b], rename[c] = f"box{i}", f"cls{i}"
    nodes = [_renamed(n, rename) for n in nodes]
    outputs = []
    for i, (h, w) in enumerate(layout.grids):
        for name, channels in ((f"box{i}", 4 * REG_MAX), (f"cls{i}", layout.nc)):
            outputs.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, [1, channels, h, w]))
    graph = onnx.helper.make_graph(nodes, model.graph.name + "_trunk",
                                   list(model.graph.input), outputs, initializer=inits)
    cut = onnx.helper.make_model(graph, opset_imports=list(model.opset_import),
                                 producer_name=model.producer_name,
                                 producer_version=model.producer_version)
    cut.ir_version = model.ir_version
    for prop in model.metadata_props:
        cut.metadata_props.add(key=prop.key, value=prop.value)
    return cut


def _renamed(node: onnx.NodeProto, rename: dict[str, str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for k, name in enumerate(copy.output):
        copy.output[k] = rename.get(name, name)
    for k, name in enumerate(copy.input):
        copy.input[k] = rename.get(name, name)
    return copy

