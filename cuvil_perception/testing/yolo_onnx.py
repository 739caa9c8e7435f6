"""Build small ONNX models with the exact node pattern of an ultralytics YOLOv8 Detect export.

The trunk is tiny (one strided conv per pyramid level); the head reproduces, node for node, what
``yolo export format=onnx`` writes for ``Detect`` (read from ultralytics' ``nn/modules/head.py``
and the real 8.4 export in ``shared/data/yolov8``):

- ``style="split"`` (ultralytics 8.4): per level the box conv (64 ch) and the class conv (nc ch)
  are reshaped to [1, C, h*w] and concatenated over levels separately.
- ``style="fused"`` (ultralytics 8.1-8.3): per level ``Concat(box, cls, axis=1)``, reshaped to
  [1, 64+nc, h*w], concatenated over levels, then ``Split([64, nc])``.
- ``simplify=False`` keeps torch's traced ``chunk`` (Shape, Gather, Add, Div, Mul, Slice) and
  ``Constant`` nodes; ``simplify=True`` folds them as onnxsim does (initializers, one ``Split``).
- ``opset < 13``: ``Softmax`` over a non-last axis is exported as Transpose/Softmax/Transpose and
  ``Split`` takes its sizes as an attribute.

Output ``output0`` is float32 [1, 4 + nc, A] (cx, cy, w, h in input pixels, then sigmoid scores),
input ``images`` float32 [1, 3, H, W]. Weights are random but seeded; ``class_bias`` shifts the
class logits so that a chosen fraction of anchors pass a 0.25 confidence.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REG_MAX = 16
STRIDES = (8, 16, 32)


class _Graph:
    """Accumulates nodes and initializers; names mimic torch's ``/model.N/...`` style loosely."""

    def __init__(self, rng: np.random.Generator, simplify: bool):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = rng
        self.simplify = simplify
        self.count = 0

    def name(self, op: str) -> str:
        self.count += 1
        return f"/model/{op}_{self.count}"

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        name = self.name(op)
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, value: np.ndarray) -> str:
        """A constant: an initializer when simplified, else a ``Constant`` node (as torch emits)."""
        value = np.asarray(value)
        if self.simplify:
            name = f"onnx::const_{len(self.inits)}"
            self.inits.append(numpy_helper.from_array(value, name))
            return name
        name = self.name("Constant")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=numpy_helper.from_array(value)))
        return out

    def weight(self, name: str, shape: tuple, scale: float, bias: float | np.ndarray = 0.0):
        w = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        b = np.broadcast_to(np.asarray(bias, dtype=np.float32), (shape[0],)).copy()
        b += (self.rng.standard_normal(shape[0]) * 0.1).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, f"{name}.weight"))
        self.inits.append(numpy_helper.from_array(b, f"{name}.bias"))
        return [f"{name}.weight", f"{name}.bias"]

    def conv(self, x: str, name: str, cin: int, cout: int, k: int, stride: int = 1,
             bias: float | np.ndarray = 0.0, scale: float | None = None) -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(cin * k * k)
        params = self.weight(name, (cout, cin, k, k), scale, bias)
        return self.node("Conv", [x, *params], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[k // 2] * 4, dilations=[1, 1], group=1)

    def silu(self, x: str) -> str:
        return self.node("Mul", [x, self.node("Sigmoid", [x])])


def build_yolov8_onnx(imgsz: int | tuple[int, int] = 64, nc: int = 3, *, style: str = "split",
                      simplify: bool = False, opset: int = 17, seed: int = 0,
                      class_bias: float = -2.0, width: int = 8) -> onnx.ModelProto:
    """A YOLOv8-detect-shaped ONNX model; see the module docstring. ``imgsz`` multiple of 32."""
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    if h % 32 or w % 32:
        raise ValueError(f"imgsz must be a multiple of 32, got {(h, w)}")
    if style not in ("split", "fused"):
        raise ValueError(f"style must be 'split' or 'fused', got {style!r}")
    g = _Graph(np.random.default_rng(seed), simplify)
    feats = _trunk(g, width)
    boxes, classes = [], []
    for i, (x, cin) in enumerate(feats):
        boxes.append(_branch(g, x, cin, 4 * REG_MAX, f"model.22.cv2.{i}", bias=0.0))
        classes.append(_branch(g, x, cin, nc, f"model.22.cv3.{i}", bias=class_bias))
    grids = [(h // s, w // s) for s in STRIDES]
    n_anchors = sum(gh * gw for gh, gw in grids)
    if style == "split":
        box_cat = _concat_levels(g, boxes, 4 * REG_MAX)
        cls_cat = _concat_levels(g, classes, nc)
    else:
        fused = [g.node("Concat", [b, c], axis=1) for b, c in zip(boxes, classes)]
        x_cat = _concat_levels(g, fused, 4 * REG_MAX + nc)
        box_cat, cls_cat = _split(g, x_cat, [4 * REG_MAX, nc], axis=1, opset=opset)
    dist = _dfl(g, box_cat, n_anchors, opset)
    dbox = _dist2bbox(g, dist, grids, opset)
    g.node("Concat", [dbox, g.node("Sigmoid", [cls_cat])], axis=1)
    g.nodes[-1].output[0] = "output0"
    return _finish(g, (h, w), nc, n_anchors, opset)


def _finish(g: _Graph, hw: tuple[int, int], nc: int, n_anchors: int,
            opset: int) -> onnx.ModelProto:
    """Wrap the nodes into a checked model with ultralytics' metadata."""
    h, w = hw
    graph = helper.make_graph(
        g.nodes, "main_graph",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + nc, n_anchors])],
        initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.4.0")
    model.ir_version = 8
    meta = {"description": "Ultralytics YOLOv8n model (cuvil test double)", "task": "detect",
            "stride": "32", "batch": "1", "imgsz": f"[{h}, {w}]",
            "names": str({i: str(i) for i in range(nc)}), "author": "Ultralytics"}
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    return model

def _trunk(g: _Graph, width: int) -> list[tuple[str, int]]:
    """images -> P3, P4, P5 feature maps (strides 8, 16, 32), each with its channel count."""
    x, cin, feats = "images", 3, []
    for i, cout in enumerate([width, width, 2 * width, 2 * width, 4 * width]):
        x = g.silu(g.conv(x, f"model.{i}.conv", cin, cout, 3, stride=2))
        cin = cout
        if i >= 2:
            feats.append((x, cin))
    return feats


def _branch(g: _Graph, x: str, cin: int, cout: int, name: str, bias: float) -> str:
    """Conv(3x3) + SiLU then the raw 1x1 Conv2d, as cv2[i] / cv3[i] end."""
    y = g.silu(g.conv(x, f"{name}.0.conv", cin, cin, 3))
    return g.conv(y, f"{name}.2", cin, cout, 1, bias=bias, scale=1.5 / np.sqrt(cin))


def _concat_levels(g: _Graph, levels: list[str], channels: int) -> str:
    flat = [g.node("Reshape", [t, g.const(np.array([1, channels, -1], np.int64))]) for t in levels]
    return g.node("Concat", flat, axis=-1 if not g.simplify else 2)


def _split(g: _Graph, x: str, sizes: list[int], axis: int, opset: int) -> tuple[str, str]:
    name = g.name("Split")
    outs = [f"{name}_output_{k}" for k in range(len(sizes))]
    if opset >= 13:
        inputs = [x, g.const(np.array(sizes, np.int64))]
        g.nodes.append(helper.make_node("Split", inputs, outs, name=name, axis=axis))
    else:
        g.nodes.append(helper.make_node("Split", [x], outs, name=name, axis=axis, split=sizes))
    return outs[0], outs[1]


def _dfl(g: _Graph, box: str, n_anchors: int, opset: int) -> str:
    """DFL: view(1, 4, 16, A).transpose(2, 1).softmax(1) -> 1x1 conv with weights 0..15."""
    x = g.node("Reshape", [box, g.const(np.array([1, 4, REG_MAX, n_anchors], np.int64))])
    x = g.node("Transpose", [x], perm=[0, 2, 1, 3])
    if opset >= 13:
        x = g.node("Softmax", [x], axis=1)
    else:  # torch exports softmax over a non-last axis this way below opset 13
        x = g.node("Transpose", [x], perm=[0, 3, 2, 1])
        x = g.node("Softmax", [x], axis=3)
        x = g.node("Transpose", [x], perm=[0, 3, 2, 1])
    weight = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
    g.inits.append(numpy_helper.from_array(weight, "model.22.dfl.conv.weight"))
    x = g.node("Conv", [x, "model.22.dfl.conv.weight"], kernel_shape=[1, 1], strides=[1, 1],
               pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    return g.node("Reshape", [x, g.const(np.array([1, 4, n_anchors], np.int64))])


def _chunk2(g: _Graph, x: str, opset: int) -> tuple[str, str]:
    """torch ``chunk(2, dim=1)``: traced Shape arithmetic + Slice, or one Split when simplified."""
    if g.simplify:
        return _split(g, x, [2, 2], axis=1, opset=opset)
    axis = g.const(np.array([1], np.int64))
    size = g.node("Gather", [g.node("Shape", [x]), axis], axis=0)
    half = g.node("Div", [g.node("Add", [size, g.const(np.array([1], np.int64))]),
                          g.const(np.array([2], np.int64))])
    end0 = g.node("Mul", [half, g.const(np.array([1], np.int64))])
    end1 = g.node("Mul", [half, g.const(np.array([2], np.int64))])
    first = g.node("Slice", [x, g.const(np.array([0], np.int64)), end0, axis])
    second = g.node("Slice", [x, end0, end1, axis])
    return first, second


def _dist2bbox(g: _Graph, dist: str, grids: list[tuple[int, int]], opset: int) -> str:
    """(l, t, r, b) distances -> (cx, cy, w, h) * stride, as ``Detect.decode_bboxes`` exports."""
    points, strides = [], []
    for (gh, gw), s in zip(grids, STRIDES):
        sy, sx = np.meshgrid(np.arange(gh) + 0.5, np.arange(gw) + 0.5, indexing="ij")
        points.append(np.stack([sx.ravel(), sy.ravel()]))
        strides.append(np.full(gh * gw, s))
    anchors = np.concatenate(points, axis=1)[None].astype(np.float32)
    stride = np.concatenate(strides)[None].astype(np.float32)
    lt, rb = _chunk2(g, dist, opset)
    x1y1 = g.node("Sub", [g.const(anchors), lt])
    x2y2 = g.node("Add", [g.const(anchors), rb])
    centre = g.node("Div", [g.node("Add", [x1y1, x2y2]), g.const(np.array(2.0, np.float32))])
    wh = g.node("Sub", [x2y2, x1y1])
    return g.node("Mul", [g.node("Concat", [centre, wh], axis=1), g.const(stride)])


def random_head_outputs(grids, nc: int, n_candidates: int, *, seed: int = 0,
                        conf: float = 0.25, ties: bool = False):
    """Random per-level raw head outputs where exactly ``n_candidates`` anchors score > ``conf``.

    Returns (box_levels, cls_levels): lists of float32 [1, 64, h, w] and [1, nc, h, w]. Class
    logits sit well below logit(conf) except one class per chosen anchor, drawn so that scores
    span (conf, 0.99). Box logits are N(0, 2), so boxes are 0-15 cells per side and overlap a lot.
    ``ties=True`` draws the passing logits from 4 values only and copies the best logit to a
    second class for half the anchors (equal scores across anchors and across classes).
    """
    rng = np.random.default_rng(seed)
    sizes = [h * w for h, w in grids]
    total = sum(sizes)
    logits = rng.uniform(-12.0, np.log(conf / (1 - conf)) - 0.5, (nc, total)).astype(np.float32)
    chosen = rng.choice(total, size=min(n_candidates, total), replace=False)
    lo, hi = np.log(conf / (1 - conf)) + 1e-3, np.log(0.99 / 0.01)
    values = rng.uniform(lo, hi, len(chosen)).astype(np.float32)
    if ties:
        values = rng.choice(np.linspace(lo + 0.1, hi, 4).astype(np.float32), len(chosen))
    classes = rng.integers(0, nc, len(chosen))
    logits[classes, chosen] = values
    if ties and nc > 1:
        twin = chosen[::2]
        logits[(classes[::2] + 1) % nc, twin] = values[::2]
    box = (rng.standard_normal((4 * REG_MAX, total)) * 2.0).astype(np.float32)
    box_levels, cls_levels, start = [], [], 0
    for (h, w), size in zip(grids, sizes):
        box_levels.append(np.ascontiguousarray(box[:, start:start + size]).reshape(1, -1, h, w))
        cls_levels.append(np.ascontiguousarray(logits[:, start:start + size]).reshape(1, nc, h, w))
        start += size
    return box_levels, cls_levels
