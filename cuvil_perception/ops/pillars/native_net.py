"""Lower the BEV network of a PointPillars model (ONNX, after the scatter) to native kernels.

    ONNX graph (onnx_sparse.plan_bev's rest, or the whole BEV part) --lower()--> NetPlan
    (pure data: kernel specs, buffer sizes, a flat float32 weights blob and its layout table)
    --native_bev.NativeNet--> callables on bound buffers

Node by node, in the graph's order:

| ONNX | lowered to |
|---|---|
| Conv [+ BatchNormalization] [+ Relu] | kernel_bev_conv (BN folded into weight and bias) |
| ConvTranspose (kernel == stride, no pads) [+ BN] [+ Relu] | kernel_bev_deconv |
| Concat (axis 1) | nothing: its parts' layers write their channels in place; kernel_bev_mask |
| Pad (zeros, H and W) read by Convs | nothing: added to their pads |
| Transpose (0,3,1,2) of the fused NHWC input, (0,2,3,1) to an output | nothing (NHWC maps) |

Anything else (an op, or an attribute the kernels do not take) is a ModelError naming the node
and its op: ``runtime: native`` refuses the model, it never falls back silently.

Maps are NHWC float32 ``[H, W, C]`` (kernel_bev_conv says why); the dense path's input is the
scatter's NCHW canvas, read in place. Each map has a change mask (u8 per cell, see
kernel_bev_conv) so the sparse path computes only what differs from the empty frame.
The weights blob (native_plan.NetPlan) holds every layer's folded weight ``[taps*cin, cpad]``
then bias ``[cpad]`` (cout zero-padded to whole 16-lane vectors), each starting on a 64-byte
boundary; ``NetPlan.table`` lists (name, offset, shape) per array, so a C library can embed
the blob as one constant and point each kernel into it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import ModelError
from .kernel_bev_conv import bev_conv_spec
from .kernel_bev_deconv import bev_deconv_spec
from .kernel_bev_mask import bev_mask_union_spec
from .native_plan import INPUT, Map, NetPlan, Step

LOWERED_OPS = ("Conv", "ConvTranspose", "BatchNormalization", "Relu", "Concat", "Transpose",
               "Pad")


def lower(model: onnx.ModelProto, roles: dict, sparse: bool, source: str) -> NetPlan:
    """``model``: the BEV network, one input ([1, H, W, C] NHWC: the fused first layer's map,
    or [1, C, H, W]: the dense canvas); roles: "cls" / "box" / "dir" -> output names (NHWC in
    ONNX too: a Transpose(0,2,3,1)), or "cls" / "feat" (the peeled heads' input map, NCHW in
    ONNX, an NHWC map here)."""
    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    lowering = _Lowering(graph, sparse, source)
    for node in graph.node:
        lowering.visit(node)
    plan = lowering.plan
    for role, name in roles.items():
        if name not in lowering.values:
            raise ModelError(f"{source}: output '{name}' ({role}) is not computed by the network")
        value = lowering.values[name]
        if role != "feat" and not lowering.nhwc.get(name, False):
            raise ModelError(f"{source}: output '{name}' ({role}) is not Transpose(0,2,3,1) of "
                             f"a map (the decode reads NHWC head maps)")
        if value.nchw:
            raise ModelError(f"{source}: output '{name}' ({role}) is the scatter's canvas "
                             f"itself: no network to lower")
        plan.outputs[role] = value
    return plan


class _Lowering:
    """The walk: ``values`` maps an ONNX tensor to its Map; ``nhwc`` marks a name whose ONNX
    layout is NHWC (the fused input, an output Transpose); ``slots`` the place a Concat part
    is written."""

    def __init__(self, graph, sparse: bool, source: str):
        self.graph, self.sparse, self.source = graph, sparse, source
        self.inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                     for v in list(graph.value_info) + list(graph.input) + list(graph.output)}
        self.users = {}
        for node in graph.node:
            for name in node.input:
                self.users.setdefault(name, []).append(node)
        self.done: set = set()
        self.values: dict = {}
        self.nhwc: dict = {}
        self.slots: dict = {}
        self.pads: dict = {}  # a Pad's output -> (top, left, bottom, right) its Convs add
        self.plan = NetPlan(self._input())

    def _input(self) -> Map:
        inp = self.graph.input[0]
        dims = self.dims[inp.name]
        if len(dims) != 4 or dims[0] != 1:
            raise ModelError(f"{self.source}: network input '{inp.name}' has shape {dims}, not "
                             f"[1, C, H, W] or [1, H, W, C]")
        fused = any(n.op_type == "Transpose" and list(_attrs(n).get("perm", [])) == [0, 3, 1, 2]
                    for n in self.users.get(inp.name, []))
        if fused:
            _, height, width, channels = dims
            value = Map(INPUT, height, width, channels, channels, 0, INPUT)
            self.nhwc[inp.name] = True
        else:
            _, channels, height, width = dims
            value = Map(INPUT, height, width, channels, channels, 0, INPUT, nchw=True)
        self.values[inp.name] = value
        return value

    def visit(self, node) -> None:
        if id(node) in self.done:
            return
        handler = {"Conv": self._conv, "ConvTranspose": self._conv, "Concat": self._concat,
                   "Transpose": self._transpose, "Pad": self._pad}.get(node.op_type)
        if handler is None:
            why = ("it does not follow a Conv / ConvTranspose whose only reader it is"
                   if node.op_type in LOWERED_OPS else
                   f"the native backbone lowers only {', '.join(LOWERED_OPS)}")
            raise self._refuse(node, why)
        handler(node)

    def _refuse(self, node, why: str) -> ModelError:
        return ModelError(f"{self.source}: runtime 'native' cannot lower node '{node.name}' "
                          f"({node.op_type}): {why}")

    def _transpose(self, node) -> None:
        perm = list(_attrs(node).get("perm", []))
        src = node.input[0]
        if perm == [0, 3, 1, 2] and self.nhwc.get(src):
            self.values[node.output[0]] = self.values[src]
            return
        outputs = {o.name for o in self.graph.output}
        if perm == [0, 2, 3, 1] and not self.nhwc.get(src) and node.output[0] in outputs \
                and src in self.values:
            self.values[node.output[0]] = self.values[src]
            self.nhwc[node.output[0]] = True
            return
        raise self._refuse(node, f"perm {perm}: only NHWC -> NCHW of the input and NCHW -> "
                                 f"NHWC of an output are layout changes the maps make")

    def _pad(self, node) -> None:
        """Zero padding of H and W read only by Convs (OpenPCDet's ZeroPad2d before a conv):
        folded into their pads, the map itself is not copied."""
        attrs = _attrs(node)
        pads = attrs.get("pads")
        if pads is None and len(node.input) > 1 and node.input[1] in self.inits:
            pads = [int(p) for p in self.inits[node.input[1]]]
        value = 0.0
        if len(node.input) > 2 and node.input[2]:
            value = float(self.inits[node.input[2]]) if node.input[2] in self.inits else None
        mode = attrs.get("mode", b"constant")
        if pads is None or len(pads) != 8 or any(pads[k] for k in (0, 1, 4, 5)) \
                or any(p < 0 for p in pads) or value != 0.0 \
                or mode not in (b"constant", "constant"):
            raise self._refuse(node, "only zero padding of H and W (constant 0, pads given)")
        users = self.users.get(node.output[0], [])
        if not users or any(u.op_type != "Conv" for u in users) \
                or node.input[0] not in self.values or node.input[0] in self.pads:
            raise self._refuse(node, "its output must be read by Convs only, of a map")
        self.values[node.output[0]] = self.values[node.input[0]]
        self.pads[node.output[0]] = (pads[2], pads[3], pads[6], pads[7])

    def _conv(self, node) -> None:
        src = self.values.get(node.input[0])
        if src is None or self.nhwc.get(node.input[0]):
            raise self._refuse(node, f"its input '{node.input[0]}' is not a map of the network")
        weight, bias, attrs = self._weights(node)
        chain, out_name = [node], node.output[0]
        norm = self._sole_user(out_name, "BatchNormalization")
        if norm is not None:
            weight, bias = self._fold(norm, node, weight, bias)
            chain.append(norm)
            out_name = norm.output[0]
        relu = self._sole_user(out_name, "Relu")
        if relu is not None:
            chain.append(relu)
            out_name = relu.output[0]
        self.done.update(id(n) for n in chain)
        dims = self.dims.get(out_name)
        if not dims or len(dims) != 4 or min(dims) < 1:
            raise self._refuse(node, f"the shape of '{out_name}' is unknown")
        out = self._destination(out_name, dims)
        what = " + ".join(f"{n.op_type} '{n.name}'" for n in chain)
        if node.op_type == "Conv":
            self._conv_step(node, src, out, weight, bias, attrs, relu is not None, what)
        else:
            self._deconv_step(node, src, out, weight, bias, attrs, relu is not None, what)
        self.values[out_name] = out

    def _sole_user(self, name: str, op_type: str):
        users = self.users.get(name, [])
        outputs = {o.name for o in self.graph.output}
        if len(users) == 1 and users[0].op_type == op_type and name not in outputs:
            return users[0]
        return None

    def _weights(self, node):
        if len(node.input) < 2 or node.input[1] not in self.inits:
            raise self._refuse(node, "its weight is not a stored initializer")
        weight = self.inits[node.input[1]].astype(np.float64)
        has_bias = len(node.input) > 2 and node.input[2]
        if has_bias and node.input[2] not in self.inits:
            raise self._refuse(node, "its bias is not a stored initializer")
        outs = weight.shape[0] if node.op_type == "Conv" else weight.shape[1]
        bias = self.inits[node.input[2]].astype(np.float64) if has_bias else np.zeros(outs)
        attrs = _attrs(node)
        if weight.ndim != 4:
            raise self._refuse(node, f"weight of rank {weight.ndim}: only 2-D convolutions")
        for key, plain in (("group", 1), ("dilations", [1, 1]), ("output_padding", [0, 0])):
            if attrs.get(key, plain) != plain:
                raise self._refuse(node, f"{key} {attrs[key]} (only {plain})")
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID") \
                or "output_shape" in attrs:
            raise self._refuse(node, "auto_pad / output_shape are not lowered: give pads")
        return weight, bias, attrs

    def _fold(self, norm, conv, weight, bias):
        params = []
        for name in norm.input[1:5]:
            if name not in self.inits:
                raise self._refuse(norm, "its parameters are not stored initializers")
            params.append(self.inits[name].astype(np.float64))
        gamma, beta, mean, var = params
        scale = gamma / np.sqrt(var + float(_attrs(norm).get("epsilon", 1e-5)))
        axis = (slice(None), None, None, None) if conv.op_type == "Conv" else \
            (None, slice(None), None, None)
        return weight * scale[axis], (bias - mean) * scale + beta

    def _destination(self, name: str, dims: list) -> Map:
        """A new map for ``name``, or its channels of a Concat it is the only reader of."""
        _, channels, height, width = dims
        concat = self._sole_user(name, "Concat")
        if concat is None:
            return self.plan.new_map(height, width, channels)
        if concat.output[0] not in self.slots:
            self._place_concat(concat)
        buffer, offset, stride = self.slots[concat.output[0]][name]
        self.plan.masks.append(height * width)
        return Map(buffer, height, width, channels, stride, offset, len(self.plan.masks) - 1)

    def _place_concat(self, concat) -> None:
        if _attrs(concat).get("axis") not in (1, -3):
            raise self._refuse(concat, f"axis {_attrs(concat).get('axis')}: only channels (1)")
        dims = self.dims.get(concat.output[0])
        if not dims or len(dims) != 4:
            raise self._refuse(concat, "its output shape is unknown")
        _, channels, height, width = dims
        whole = self.plan.new_map(height, width, channels)
        slots, offset = {}, 0
        for name in concat.input:
            slots[name] = (whole.buffer, offset, channels)
            offset += self.dims[name][1]
        self.slots[concat.output[0]] = slots
        self.values["__whole__" + concat.output[0]] = whole

    def _concat(self, node) -> None:
        whole = self.values.get("__whole__" + node.output[0])
        parts = [self.values.get(name) for name in node.input]
        if whole is None or any(p is None or p.buffer != whole.buffer for p in parts):
            raise self._refuse(node, "each input must be a Conv / ConvTranspose layer that "
                                     "only this Concat reads")
        spec = bev_mask_union_spec(whole.height * whole.width)
        first = ("mask", parts[0].mask)
        for part in parts[1:]:
            self.plan.steps.append(Step(spec, (first, ("mask", part.mask),
                                               ("mask", whole.mask)), f"Concat '{node.name}'"))
            first = ("mask", whole.mask)
        if len(parts) == 1:
            self.plan.steps.append(Step(spec, (first, first, ("mask", whole.mask)),
                                        f"Concat '{node.name}'"))
        self.values[node.output[0]] = whole

    def _conv_step(self, node, src: Map, out: Map, weight, bias, attrs, relu, what) -> None:
        cout, cin, kh, kw = weight.shape
        stride = tuple(int(s) for s in attrs.get("strides", [1, 1]))
        pads = tuple(int(p) for p in attrs.get("pads", [0, 0, 0, 0]))
        extra = self.pads.get(node.input[0], (0, 0, 0, 0))
        pads = (pads[0] + extra[0], pads[1] + extra[1], pads[2] + extra[2], pads[3] + extra[3])
        if cin != src.channels:
            raise self._refuse(node, f"weight reads {cin} channels, its input has "
                                     f"{src.channels}")
        packed = weight.transpose(2, 3, 1, 0).reshape(kh * kw * cin, cout)
        spec = bev_conv_spec(cin=cin, cout=cout, kernel=(kh, kw), stride=stride, pads=pads,
                             in_size=(src.height, src.width), out_size=(out.height, out.width),
                             in_layout=src.in_layout(), out_layout=(out.stride, out.offset),
                             relu=relu, sparse=self.sparse)
        self._step(spec, node, src, out, packed, bias, what)

    def _deconv_step(self, node, src: Map, out: Map, weight, bias, attrs, relu, what) -> None:
        cin, cout, kh, kw = weight.shape
        stride = [int(s) for s in attrs.get("strides", [1, 1])]
        if not (kh == kw == stride[0] == stride[1]) or any(attrs.get("pads", [0] * 4)):
            raise self._refuse(node, f"kernel {[kh, kw]}, strides {stride}, pads "
                                     f"{attrs.get('pads')}: only kernel == stride, no pads")
        if (out.height, out.width) != (src.height * kh, src.width * kw) or cin != src.channels:
            raise self._refuse(node, "its output shape does not follow from its input")
        packed = weight.transpose(2, 3, 0, 1).reshape(kh * kw * cin, cout)
        spec = bev_deconv_spec(cin=cin, cout=cout, stride=kh, in_size=(src.height, src.width),
                               in_layout=src.in_layout(), out_layout=(out.stride, out.offset),
                               relu=relu, sparse=self.sparse)
        self._step(spec, node, src, out, packed, bias, what)

    def _step(self, spec, node, src: Map, out: Map, packed, bias, what) -> None:
        plan = self.plan
        width = spec.static["cpad"]  # rows zero-padded to whole vectors
        weights = plan.add_weights(f"{node.name}.weight", _pad(packed, width))
        biases = plan.add_weights(f"{node.name}.bias", _pad(bias[None], width)[0])
        inp = ("input",) if src.buffer == INPUT else ("buffer", src.buffer)
        in_mask = ("input_mask",) if src.mask == INPUT else ("mask", src.mask)
        plan.steps.append(Step(spec, (inp, weights, biases, ("buffer", out.buffer), in_mask,
                                      ("mask", out.mask)), what))


def _pad(rows: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((rows.shape[0], width), np.float32)
    out[:, :rows.shape[1]] = rows
    return out


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
