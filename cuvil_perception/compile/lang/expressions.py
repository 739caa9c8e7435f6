"""Lowering expressions other than comparisons, ``and``/``or`` (`logic_lower`) and calls
(`calls`): constants, names (locals, then the kernel module's globals), ``buf.shape`` and
module attributes, tuples, arithmetic and unary operators, ``a if c else b`` and subscripts
(elements, slices, vector lanes, items of static tuples and arrays).

Each ``lower_*`` function is `lower.EXPRESSIONS`' entry for its node type; it takes the
`lower.Lowerer` as ``lw``.
"""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .. import irutil as u
from .arith import convert, invert, negate, truth
from .constants import is_vector_constant
from .fold_lower import fold_unary
from .lane_lower import lane
from .scope import BINOPS, UNARYOPS, Var
from .slice_lower import is_slice, slice_load
from .types import BOOL, I64, VecType
from .values import BufRef, Const, UnknownExtent, Val
from .vector_lower import vec_unary


def lower_constant(lw, node: ast.Constant):
    if isinstance(node.value, (bool, int, float)):
        return Const(node.value)
    lw.fail(node, f"a {type(node.value).__name__} constant", "a number")


def lower_name(lw, node: ast.Name):
    found = lw.frame.env.get(node.id)
    if isinstance(found, Var):
        return Val(lw.b.load(found.slot, typ=found.ty.ir), found.ty)
    if found is not None:
        return found
    return lw.resolve(node)


def lower_attribute(lw, node: ast.Attribute):
    base = lw.expr(node.value) if isinstance(node.value, ast.Name) and \
        node.value.id in lw.frame.env else None
    if isinstance(base, BufRef):
        if node.attr == "shape":
            return tuple(Const(e.constant) if isinstance(e, ir.Constant)
                         else UnknownExtent(base.name, k) if e is None
                         else Val(e, I64) for k, e in enumerate(base.extents))
        lw.fail(node, f"buffers have no attribute '{node.attr}' here", "`buf.shape[k]`")
    if base is not None:
        lw.fail(node, f"`{ast.unparse(node)}`: attributes of values are not supported")
    return lw.resolve(node)


def lower_tuple(lw, node: ast.Tuple):
    items = [lw.expr(e) for e in node.elts]
    if all(isinstance(i, Const) for i in items):
        return Const(tuple(i.value for i in items))
    return tuple(items)


def lower_binop(lw, node: ast.BinOp):
    op = BINOPS.get(type(node.op))
    if op is None:
        lw.fail(node, f"operator {type(node.op).__name__}", "plain arithmetic")
    return lw.arith(op, lw.expr(node.left), lw.expr(node.right), node)


def lower_unaryop(lw, node: ast.UnaryOp):
    x = lw.expr(node.operand)
    kind = type(node.op)
    if isinstance(x, Const):
        op = UNARYOPS[kind]
        return fold_unary(lw, op, x, node)
    if isinstance(x, Val) and isinstance(x.ty, VecType) and kind is not ast.Not:
        return vec_unary(lw, kind, x, node)
    val = lw.value(x, node.operand)
    if kind is ast.USub:
        return negate(lw.b, val, lw.flags)
    if kind is ast.UAdd:
        return val
    if kind is ast.Not:
        t = truth(lw.b, val)
        return Val(lw.b.xor(t.ir, ir.Constant(u.I1, 1)), BOOL)
    if val.ty.is_float:
        lw.fail(node, "`~` on a float", "an int")
    return invert(lw.b, val)


def lower_ifexp(lw, node: ast.IfExp):
    cond = lw.expr(node.test)
    if isinstance(cond, Const):
        return lw.expr(node.body if cond.value else node.orelse)
    cond = truth(lw.b, lw.value(cond, node.test))
    then = lw.fn.append_basic_block("ifx.then")
    other = lw.fn.append_basic_block("ifx.else")
    done = lw.fn.append_basic_block("ifx.end")
    lw.b.cbranch(cond.ir, then, other)
    lw.b.position_at_end(then)
    a_val = lw.value(lw.expr(node.body), node.body)
    then_end = lw.b.block
    lw.b.position_at_end(other)
    c_val = lw.value(lw.expr(node.orelse), node.orelse)
    other_end = lw.b.block
    ty = a_val.ty
    if a_val.ty != c_val.ty:  # a literal joins the other side's type; else it is an error
        weak, strong = (a_val, c_val) if a_val.weak else (c_val, a_val)
        if not weak.weak or (weak.ty.is_float and not strong.ty.is_float):
            lw.fail(node, f"the branches are {a_val.ty} and {c_val.ty}",
                    "a cast on one branch")
        ty = strong.ty
        lw.joins(a_val, c_val, node.body, node.orelse)
    incoming = []
    for block, val in ((then_end, a_val), (other_end, c_val)):
        lw.b.position_at_end(block)
        incoming.append((convert(lw.b, val, ty).ir, lw.b.block))
        lw.b.branch(done)
    lw.b.position_at_end(done)
    phi = lw.b.phi(ty.ir)
    for v, blk in incoming:
        phi.add_incoming(v, blk)
    return Val(phi, ty, a_val.weak and c_val.weak)


def lower_subscript(lw, node: ast.Subscript):
    base = lw.expr(node.value)
    if isinstance(base, Const) and isinstance(base.value, np.ndarray) \
            and not is_vector_constant(base.value):
        lw.fail(node.value, f"`{ast.unparse(node.value)}` is a module-level numpy array: "
                "a kernel reads module-level numbers, tuples and `simd.vector`s as "
                "constants, not arrays", "a buffer parameter (the array passed in the "
                f"call), or a tuple (`{ast.unparse(node.value)} = (...)`) for a small "
                "constant table")
    if isinstance(base, Const) or isinstance(base, tuple):
        key = lw.expr(node.slice)
        if not isinstance(key, Const) or not isinstance(key.value, int):
            lw.fail(node.slice, f"`{ast.unparse(node.value)}` is a static tuple, "
                    "indexed by a run-time value",
                    "`for x in tuple:` (unrolled) or a buffer")
        seq = base.value if isinstance(base, Const) else base
        if not isinstance(seq, (tuple, list)):
            lw.fail(node, f"`{ast.unparse(node.value)}` cannot be indexed")
        try:
            item = seq[key.value]
        except IndexError:
            lw.fail(node, f"index {key.value} out of range for a static tuple of "
                    f"{len(seq)}")
        return item if isinstance(base, tuple) else Const(item)
    if isinstance(base, Val) and isinstance(base.ty, VecType):
        return lane(lw, base, node)
    if not isinstance(base, BufRef):
        lw.fail(node, f"`{ast.unparse(node.value)}` cannot be indexed")
    if is_slice(node):
        return slice_load(lw, base, node)
    ptr = lw.element(base, node)
    ty = base.ty.dtype
    raw = lw.b.load(ptr, typ=ty.ir)
    return convert(lw.b, Val(raw, ty), ty.compute)
