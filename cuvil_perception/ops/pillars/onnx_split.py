"""Split a CUDA-PointPillars ONNX model at its PPScatterPlugin node.

Layout accepted (what CUDA-PointPillars' tool/export_onnx.py + modify_onnx.py write)::

    inputs   voxels [P, 32, 10] float32, voxel_idxs [P, 4] int32 (0, z, y, x), voxel_num [1] int32
    PFN      voxels -> (Reshape) -> MatMul [10, C] -> BatchNormalization -> Relu -> (Reshape)
             -> ReduceMax(axes=[1], keepdims=0) -> [P, C]
    scatter  PPScatterPlugin(features, voxel_idxs, voxel_num), attribute dense_shape = [ny, nx]
    BEV      everything after the scatter: backbone + head, outputs cls / box / dir maps (NHWC)

The PFN becomes ``PfnWeights`` for the native kernel; the BEV part becomes a standalone ONNX model
with one input, the [1, C, ny, nx] scatter output. Anything else is a ``ModelError`` naming the
node (or input) that does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...errors import ModelError
from ..onnx_shapes import value_dims
from .types import PfnWeights

PFN_OPS = ("MatMul", "BatchNormalization", "Relu", "ReduceMax")
ROLES = ("cls", "box", "dir")


@dataclass
class SplitModel:
    """The two halves of a CUDA-PointPillars model.

    pfn: the PFN weights; bev: ONNX model, input ``bev_input`` float32 [1, C, ny, nx], outputs
    named in ``outputs`` by role ("cls", "box", "dir"); dense_shape = (ny, nx); max_voxels = P.
    """

    pfn: PfnWeights
    bev: onnx.ModelProto
    bev_input: str
    outputs: dict
    dense_shape: tuple
    max_voxels: int


def split_pointpillars(model: onnx.ModelProto, source: str = "<model>") -> SplitModel:
    """Validate the layout of ``model`` and split it; ``source`` names the file in errors."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    inputs = {i.name: i for i in graph.input if i.name not in inits}
    inits.update(_constant_nodes(graph))  # weights of an unsimplified export live in Constants
    _check_inputs(inputs, source)
    scatter = _single_scatter(graph, source)
    pfn, features = _walk_pfn(graph, inits, scatter, source)
    dense = _dense_shape(scatter, source)
    max_voxels = value_dims(inputs["voxels"])[0]
    bev_nodes = _downstream(graph, scatter.output[0], inits)
    _check_closed(bev_nodes, inits, scatter.output[0], source)
    outputs = _roles(graph, source)
    used = {name for node in bev_nodes for name in node.input}
    bev_graph = helper.make_graph(
        bev_nodes, f"{graph.name}_bev",
        [helper.make_tensor_value_info(scatter.output[0], TensorProto.FLOAT,
                                       [1, pfn.channels, dense[0], dense[1]])],
        list(graph.output), [t for name, t in inits.items() if name in used])
    bev = helper.make_model(bev_graph, opset_imports=list(model.opset_import),
                            producer_name="cuvil_perception.ops.pillars.onnx_split")
    bev.ir_version = model.ir_version
    return SplitModel(pfn, bev, scatter.output[0], outputs, dense,
                      max_voxels if isinstance(max_voxels, int) else 0)


def _check_inputs(inputs: dict, source: str) -> None:
    expected = {"voxels": [None, 32, 10], "voxel_idxs": [None, 4], "voxel_num": [1]}
    for name, shape in expected.items():
        if name not in inputs:
            raise ModelError(f"{source}: no input '{name}'; the CUDA-PointPillars layout has "
                             f"inputs voxels [P, 32, 10], voxel_idxs [P, 4], voxel_num [1] "
                             f"(found {sorted(inputs)})")
        dims = value_dims(inputs[name])
        if len(dims) != len(shape) or any(e is not None and d not in (None, e)
                                          for d, e in zip(dims, shape)):
            raise ModelError(f"{source}: input '{name}' has shape {dims}, expected {shape} "
                             f"(None = any)")


def _single_scatter(graph, source: str):
    found = [n for n in graph.node if n.op_type == "PPScatterPlugin"]
    if len(found) != 1:
        raise ModelError(f"{source}: expected exactly one PPScatterPlugin node, found "
                         f"{len(found)}")
    node = found[0]
    if len(node.input) != 3 or list(node.input[1:]) != ["voxel_idxs", "voxel_num"]:
        raise ModelError(f"{source}: node '{node.name}' (PPScatterPlugin) must read "
                         f"(features, voxel_idxs, voxel_num), reads {list(node.input)}")
    return node


def _walk_pfn(graph, inits: dict, scatter, source: str) -> tuple[PfnWeights, str]:
    """Follow the single chain voxels -> ... -> scatter input, collecting the PFN weights."""
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    tensor, step, found = "voxels", 0, {}
    while tensor != scatter.input[0]:
        users = consumers.get(tensor, [])
        if len(users) != 1:
            names = ", ".join(f"'{n.name}' ({n.op_type})" for n in users) or "nothing"
            raise ModelError(f"{source}: tensor '{tensor}' of the PFN part feeds {names}; "
                             f"expected one node")
        node = users[0]
        if node.op_type == "Reshape":
            tensor = node.output[0]
            continue
        if step >= len(PFN_OPS) or node.op_type != PFN_OPS[step]:
            want = PFN_OPS[step] if step < len(PFN_OPS) else "the PPScatterPlugin"
            raise ModelError(f"{source}: node '{node.name}' ({node.op_type}) in the PFN part; "
                             f"expected {want} (layout: MatMul, BatchNormalization, Relu, "
                             f"ReduceMax, with optional Reshapes)")
        found[node.op_type] = node
        step, tensor = step + 1, node.output[0]
    if step != len(PFN_OPS):
        raise ModelError(f"{source}: the PFN part before '{scatter.name}' lacks "
                         f"{', '.join(PFN_OPS[step:])}")
    return _pfn_weights(found, inits, source), tensor


def _const(node, index: int, inits: dict, source: str) -> np.ndarray:
    if index >= len(node.input) or node.input[index] not in inits:
        raise ModelError(f"{source}: node '{node.name}' ({node.op_type}) input {index} must be "
                         f"an initializer (a stored weight)")
    return numpy_helper.to_array(inits[node.input[index]]).astype(np.float32)


def _pfn_weights(found: dict, inits: dict, source: str) -> PfnWeights:
    matmul, norm, reduce = found["MatMul"], found["BatchNormalization"], found["ReduceMax"]
    linear = _const(matmul, 1, inits, source)
    if linear.ndim != 2 or linear.shape[0] != 10:
        raise ModelError(f"{source}: node '{matmul.name}' (MatMul) weight has shape "
                         f"{linear.shape}, expected [10, C]")
    params = [_const(norm, k, inits, source) for k in range(1, 5)]
    if any(p.shape != (linear.shape[1],) for p in params):
        raise ModelError(f"{source}: node '{norm.name}' (BatchNormalization) parameters do not "
                         f"have {linear.shape[1]} channels")
    attrs = {a.name: helper.get_attribute_value(a) for a in norm.attribute}
    axes, keepdims = _reduce_args(reduce, inits)
    if axes not in ([1], [-2]) or keepdims != 0:
        raise ModelError(f"{source}: node '{reduce.name}' (ReduceMax) must reduce axis 1 of "
                         f"[P, 32, C] with keepdims=0, has axes={axes} keepdims={keepdims}")
    gamma, beta, mean, var = params
    return PfnWeights(linear, gamma, beta, mean, var, float(attrs.get("epsilon", 1e-5)))


def _constant_nodes(graph) -> dict:
    """Output name -> TensorProto of every Constant node with a tensor ``value``."""
    found = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    found[node.output[0]] = attr.t
    return found


def _reduce_args(node, inits: dict) -> tuple[list | None, int | None]:
    """ReduceMax axes and keepdims as ints, whichever way the opset stores them: ``axes`` is an
    attribute up to opset 17 and an input from 18; CUDA-PointPillars' modify_onnx.py writes
    ``keepdims`` as the one-element list [0]."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1] in inits:
        axes = numpy_helper.to_array(inits[node.input[1]]).reshape(-1).tolist()
    keepdims = attrs.get("keepdims", 1)
    if isinstance(keepdims, (list, tuple)):
        keepdims = keepdims[0] if len(keepdims) == 1 else None
    return (None if axes is None else [int(a) for a in axes]), keepdims


def _dense_shape(scatter, source: str) -> tuple:
    attrs = {a.name: helper.get_attribute_value(a) for a in scatter.attribute}
    dense = list(attrs.get("dense_shape", []))
    if len(dense) != 2 or min(dense) < 1:
        raise ModelError(f"{source}: node '{scatter.name}' (PPScatterPlugin) needs a "
                         f"dense_shape attribute [ny, nx], has {dense}")
    return int(dense[0]), int(dense[1])


def _downstream(graph, start: str, inits: dict) -> list:
    """Nodes that depend on tensor ``start``, plus the nodes that compute their weights from
    stored tensors only (an INT8 QDQ model's weight DequantizeLinear), in graph order."""
    all_nodes = list(graph.node)
    live, chosen = {start}, set()
    for index, node in enumerate(all_nodes):
        if any(name in live for name in node.input):
            chosen.add(index)
            live.update(node.output)
    needed = {name for i in chosen for name in all_nodes[i].input} - live
    chosen |= {i for i, node in enumerate(all_nodes) if node.op_type != "Constant"
               and all(not name or name in inits for name in node.input)
               and any(name in needed for name in node.output)}
    return [node for i, node in enumerate(all_nodes) if i in chosen]


def _check_closed(nodes: list, inits: dict, start: str, source: str) -> None:
    produced = {start} | set(inits) | {o for n in nodes for o in n.output}
    for node in nodes:
        for name in node.input:
            if name and name not in produced:
                raise ModelError(f"{source}: node '{node.name}' ({node.op_type}) after the "
                                 f"scatter reads '{name}', which is not computed from the BEV map")


def _roles(graph, source: str) -> dict:
    roles = {}
    for output in graph.output:
        name = output.name.lower()
        role = "dir" if "dir" in name else "box" if "box" in name else \
            "cls" if "cls" in name else None
        if role is None or role in roles:
            raise ModelError(f"{source}: output '{output.name}' is not one of cls_preds, "
                             f"box_preds, dir_cls_preds")
        roles[role] = output.name
    missing = [r for r in ROLES if r not in roles]
    if missing:
        raise ModelError(f"{source}: no output for {', '.join(missing)} (expected cls_preds, "
                         f"box_preds, dir_cls_preds)")
    return roles
