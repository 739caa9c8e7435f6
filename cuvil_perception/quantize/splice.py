"""Put a rewritten subgraph (the quantised BEV part of a PointPillars model) back into the model
it was split from, so the result keeps the original layout and loads with the same op."""

from __future__ import annotations

import onnx
from onnx import helper


def replace_subgraph(model: onnx.ModelProto, part: onnx.ModelProto,
                     rewritten: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the nodes of ``part`` (matched by name) replaced by ``rewritten``'s nodes.

    ``part`` is a subgraph of ``model`` with the same tensor names at its boundary (its inputs
    are produced in ``model``, its outputs are ``model``'s); ``rewritten`` is ``part`` after a
    transformation that keeps those names (quantisation inserts nodes inside). Initializers:
    ``model``'s still used, plus ``rewritten``'s. The default-domain opset becomes the higher of
    the two (per-channel QDQ needs 13). Nodes are put back in topological order.
    """
    names = {n.name for n in part.graph.node}
    kept = [n for n in model.graph.node if n.name not in names]
    nodes = _topological(kept + list(rewritten.graph.node), model.graph)
    produced = {name for node in nodes for name in node.output}
    # a quantised bias keeps its float name as the output of its DequantizeLinear
    used = {name for node in nodes for name in node.input} - produced
    inits = {t.name: t for t in model.graph.initializer}
    inits.update({t.name: t for t in rewritten.graph.initializer})
    graph = helper.make_graph(nodes, model.graph.name, list(model.graph.input),
                              list(model.graph.output),
                              [t for name, t in inits.items() if name in used])
    out = helper.make_model(graph, opset_imports=_opsets(model, rewritten),
                            producer_name="cuvil-perception quantize")
    out.ir_version = max(model.ir_version, rewritten.ir_version)
    out.metadata_props.extend(model.metadata_props)
    return out


def _opsets(model: onnx.ModelProto, rewritten: onnx.ModelProto) -> list:
    versions: dict[str, int] = {}
    for opset in list(model.opset_import) + list(rewritten.opset_import):
        versions[opset.domain] = max(versions.get(opset.domain, 0), opset.version)
    return [helper.make_opsetid(domain, version) for domain, version in versions.items()]


def _topological(nodes: list, graph) -> list:
    """Kahn's order, stable (a node keeps its place unless an input is produced later)."""
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    for node in nodes:
        if node.op_type == "Constant":
            available.update(node.output)
    produced_by = {out: node for node in nodes for out in node.output}
    available |= {name for node in nodes for name in node.input if name not in produced_by}
    ordered, pending = [], list(nodes)
    while pending:
        ready = [n for n in pending if all(i in available for i in n.input)]
        if not ready:
            raise ValueError("the spliced graph has a cycle or a dangling input")
        for node in ready:
            ordered.append(node)
            available.update(node.output)
        pending = [n for n in pending if all(n is not r for r in ready)]
    return ordered
