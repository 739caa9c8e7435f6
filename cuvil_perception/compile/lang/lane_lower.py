"""Lowering of vectors lane by lane: a vector built from its lanes (``simd.vector``, a
module-level constant vector), one lane read or replaced (``v[k]``, ``simd.insert``), lanes
picked (``simd.shuffle``, ``simd.slice``)."""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from .simd_lower import index_of
from .types import BOOL, COMPUTE, VecType, vec_type
from .values import BufRef, Const, Val
from .vector_lower import as_vector, scalar_for, vlanes


def v_vector(lw, node) -> Val:
    ty, items = lw.args(node, 2)
    elem = ty.value if isinstance(ty, Const) else None
    values = items.value if isinstance(items, Const) else items
    if elem not in COMPUTE or elem == BOOL or not isinstance(values, (tuple, list)):
        lw.fail(node, "simd.vector needs an element type and a tuple of lanes",
                "`simd.vector(f32, (x, y, z))` (i32, i64, f32 or f64)")
    vty = VecType(elem, vlanes(lw, Const(len(values)), node.args[1]))
    lanes = [Const(v) for v in values] if isinstance(items, Const) else values
    return Val(build_vector(lw, vty, lanes, node.args[1]), vty)


def build_vector(lw, vty: VecType, items, node) -> ir.Value:
    """The vector whose lane k is ``items[k]`` (scalars of the element type, or literals)."""
    vector = ir.Constant(vty.ir, ir.Undefined)
    for k, item in enumerate(items):
        vector = lw.b.insert_element(vector, scalar_for(lw, vty, item, node),
                                     u.const_i32(k))
    return vector


def constant_vector(lw, v, node) -> Val:
    """A module-level `simd.Vector` as a constant vector value."""
    elem = next((t for t in COMPUTE if t != BOOL and t.dtype == v.dtype), None)
    if elem is None or v.ndim != 1:
        lw.fail(node, f"`{ast.unparse(node)}` is a {v.ndim}-d vector of {v.dtype}",
                "`simd.vector(f32, (x, y, z))` (i32, i64, f32 or f64 lanes)")
    vty = VecType(elem, vlanes(lw, Const(len(v)), node))
    return Val(ir.Constant(vty.ir, [ir.Constant(elem.ir, x) for x in v.tolist()]), vty)


def lane_index(lw, v: Val, k, node, vnode) -> ir.Value:
    lanes = v.ty.lanes
    if isinstance(k, Const):
        if not isinstance(k.value, int) or isinstance(k.value, bool) \
                or not -lanes <= k.value < lanes:
            lw.fail(node, f"lane {k.value!r} of a {v.ty}", f"a lane in [0, {lanes})")
        return u.const_i32(k.value % lanes)
    idx = index_of(lw, k, node)
    if lw.debug:
        lanes_of = BufRef(None, None, (u.const_i64(lanes),), (), f"{ast.unparse(vnode)}")
        lw.check_index(lanes_of, 0, idx, node)
    return idx


def lane(lw, v: Val, node: ast.Subscript) -> Val:
    """``v[k]``: one lane."""
    if isinstance(node.slice, (ast.Slice, ast.Tuple)):
        lw.fail(node, "a vector takes one lane index",
                "`simd.slice(v, start, n)` or `simd.shuffle(v, lanes)`")
    idx = lane_index(lw, v, lw.expr(node.slice), node.slice, node.value)
    return Val(lw.b.extract_element(v.ir, idx), v.ty.elem)


def v_insert(lw, node) -> Val:
    v, k, x = lw.args(node, 3)
    v = as_vector(lw, v, node.args[0])
    idx = lane_index(lw, v, k, node.args[1], node.args[0])
    return Val(lw.b.insert_element(v.ir, scalar_for(lw, v.ty, x, node.args[2]), idx),
               v.ty)


def v_shuffle(lw, node) -> Val:
    v, lanes = lw.args(node, 2)
    v = as_vector(lw, v, node.args[0])
    n = v.ty.lanes
    picks = lanes.value if isinstance(lanes, Const) else None
    if not isinstance(picks, (tuple, list, range)) or not picks or any(
            isinstance(k, bool) or not isinstance(k, int) or not -n <= k < n for k in picks):
        lw.fail(node.args[1], f"simd.shuffle needs a static tuple of lanes in [0, {n})",
                "`simd.shuffle(v, (0, 2, 4))`")
    return pick(lw, v, [k % n for k in picks])


def pick(lw, v: Val, lanes: list) -> Val:
    mask = ir.Constant(u.vec(u.I32, len(lanes)), lanes)
    return Val(lw.b.shuffle_vector(v.ir, ir.Constant(v.ty.ir, ir.Undefined), mask),
               vec_type(v.ty.elem, len(lanes)))


def v_slice(lw, node) -> Val:
    v, start, n = lw.args(node, 3)
    v = as_vector(lw, v, node.args[0])
    first = start.value if isinstance(start, Const) else None
    count = n.value if isinstance(n, Const) else None
    if not (isinstance(first, int) and isinstance(count, int)
            and 0 <= first < first + count <= v.ty.lanes):
        lw.fail(node, f"simd.slice needs constant lanes inside the {v.ty}",
                f"`simd.slice(v, start, n)` with 0 <= start < start + n <= {v.ty.lanes}")
    return pick(lw, v, list(range(first, first + count)))
