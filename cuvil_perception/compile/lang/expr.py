"""Expressions: names, constants, operators, ``a if c else b``, indexing ``buf[i, j]``.

Constants fold at compile time with the run-time semantics (`folding`); everything else lowers to IR
(see `arith` for the run-time semantics). ``and``/``or``/``not`` take truth values and give a
bool (Python would return an operand), and short-circuit as in Python.
"""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .. import irutil as u
from .arith import convert, int_index, invert, negate, truth
from .constants import is_vector_constant
from .fold_lower import FoldMixin
from .names import binding_lines, unbound
from .scope import BINOPS, UNARYOPS, Var
from .slice_lower import is_slice
from .types import BOOL, BufType, Scalar, VecType
from .values import (BufRef, Const, UnknownExtent, Val, const_type, materialize,
                     out_of_range)

class ExprMixin(FoldMixin):
    """Expression lowering for `lower.Lowerer`."""

    def expr(self, node: ast.expr):
        handler = getattr(self, f"e_{type(node).__name__}", None)
        if handler is None:
            self.fail(node, f"`{type(node).__name__}` expressions are not supported in kernels",
                      _EXPR_HINTS.get(type(node).__name__))
        out = handler(node)
        if isinstance(out, Const) and is_vector_constant(out.value):
            # an item of a module-level tuple of vectors (`PAIRS[0]`, `for v in PAIRS`)
            return self.constant_vector(out.value, node)
        return out

    def value(self, x, node, want: Scalar | None = None, vector: bool = False) -> Val:
        """A run-time `Val` of ``x`` (constants materialise, as ``want`` when it fits); a
        vector only where ``vector`` says it may be one."""
        if isinstance(x, Val):
            if isinstance(x.ty, VecType) and not vector:
                self.fail(node, f"`{ast.unparse(node)}` is a {x.ty} where a number is needed",
                          "one lane `v[k]`, a reduction such as `simd.reduce_add(v)`, or the "
                          "simd form of the operation (`simd.min`, `simd.select`, ...)")
            return x
        if isinstance(x, Const):
            ty = const_type(x.value)
            if ty is None:
                self.fail(node, f"`{ast.unparse(node)}` is a {type(x.value).__name__}, not a "
                          f"number", "one element of it, `t[k]`")
            if want is not None and (want.is_float or not ty.is_float):
                ty = want if ty != BOOL or want == BOOL else ty
            if (bad := out_of_range(x.value, ty)) is not None:
                self.fail(node, *bad)
            return materialize(x.value, ty)
        if isinstance(x, BufRef):
            self.fail(node, f"buffer '{x.name}' used as a number", f"an element, `{x.name}[i]`")
        if isinstance(x, UnknownExtent):
            self.fail(node, f"axis {x.axis} of buffer '{x.buf}' has no known extent (`None`)",
                      "an extent in its annotation, `Buf[f32, \"n\", ...]`")
        self.fail(node, f"`{ast.unparse(node)}` is not a value")

    def const_int(self, node: ast.expr, what: str) -> int:
        x = self.expr(node)
        if not (isinstance(x, Const) and isinstance(x.value, int)):
            self.fail(node, f"{what} must be a compile-time int (a literal or a static "
                      f"parameter)")
        return x.value

    def index_value(self, node: ast.expr, at, buf: BufRef | None = None,
                    axis: int = 0) -> ir.Value:
        """``node`` as an i64 index; on an axis of ``buf``, a constant must lie in range."""
        x = self.expr(node)
        if buf is not None and isinstance(x, Const) and isinstance(x.value, int):
            self.constant_index(buf, axis, x.value, node)
        val = self.value(x, node)
        if val.ty.is_float:
            self.fail(node, f"`{ast.unparse(node)}` is {val.ty}, an index must be an int",
                      f"`i64({ast.unparse(node)})`")
        return int_index(self.b, val)

    def constant_index(self, buf: BufRef, axis: int, k: int, node: ast.expr) -> None:
        """A constant index is checked when compiling: kernels do not wrap a negative index
        as Python does (it would address memory before the buffer)."""
        extent = buf.extents[axis] if axis < len(buf.extents) else None
        if k < 0:
            dim = buf.ty.dims[axis] if axis < len(buf.ty.dims) else None
            hint = (f"`{extent.constant + k}`" if isinstance(extent, ir.Constant)
                    else f"`{dim or f'len({buf.name})'} - {-k}`")
            self.fail(node, f"negative index {k} on axis {axis} of '{buf.name}': kernels do not "
                      "count from the end as Python does", hint)
        if isinstance(extent, ir.Constant) and k >= extent.constant:
            self.fail(node, f"index {k} out of range for axis {axis} of '{buf.name}' (extent "
                      f"{extent.constant})")

    def scalar_annotation(self, node: ast.expr) -> Scalar:
        ty = self.resolve(node)
        if isinstance(ty, Const) and isinstance(ty.value, Scalar) and ty.value.compute == \
                ty.value:
            return ty.value
        self.fail(node, f"`{ast.unparse(node)}` is not a scalar type",
                  "one of boolean, i32, i64, f32, f64")

    # -- leaves -------------------------------------------------------------------------
    def e_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return Const(node.value)
        self.fail(node, f"a {type(node.value).__name__} constant", "a number")

    def e_Name(self, node: ast.Name):
        found = self.frame.env.get(node.id)
        if isinstance(found, Var):
            return Val(self.b.load(found.slot, typ=found.ty.ir), found.ty)
        if found is not None:
            return found
        return self.resolve(node)

    def resolve(self, node: ast.expr):
        """A name or dotted name from the kernel's module globals, as a `Const`."""
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            self.fail(node, "not a name")
        bound = binding_lines(self.frame.src.tree, node.id)
        if bound:  # a local (in Python, the module's name of that spelling is hidden)
            self.fail(node, *self.prange_private.get(node.id, unbound(node.id, bound)))
        scope = self.frame.src.fn.__globals__
        builtins = scope.get("__builtins__", {})
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        if node.id in scope:
            obj = scope[node.id]
        elif node.id in builtins:
            obj = builtins[node.id]
        elif node.id in self.frame.src.fn.__code__.co_freevars:
            self.fail(node, f"'{node.id}' is a variable of the function the kernel is defined "
                      "in; kernels see module-level names only", f"a module-level definition of "
                      f"'{node.id}' (helpers too), or a static parameter")
        else:
            self.fail(node, f"name '{node.id}' is not defined",
                      "a parameter, a static parameter or a module-level constant")
        for attr in reversed(path):
            if not hasattr(obj, attr):
                self.fail(node, f"'{node.id}' has no attribute '{attr}'")
            obj = getattr(obj, attr)
        if is_vector_constant(obj):
            return self.constant_vector(obj, node)
        return Const(obj)

    def e_Attribute(self, node: ast.Attribute):
        base = self.expr(node.value) if isinstance(node.value, ast.Name) and \
            node.value.id in self.frame.env else None
        if isinstance(base, BufRef):
            if node.attr == "shape":
                return tuple(Const(e.constant) if isinstance(e, ir.Constant)
                             else UnknownExtent(base.name, k) if e is None
                             else Val(e, _I64()) for k, e in enumerate(base.extents))
            self.fail(node, f"buffers have no attribute '{node.attr}' here", "`buf.shape[k]`")
        if base is not None:
            self.fail(node, f"`{ast.unparse(node)}`: attributes of values are not supported")
        return self.resolve(node)

    def e_Tuple(self, node: ast.Tuple):
        items = [self.expr(e) for e in node.elts]
        if all(isinstance(i, Const) for i in items):
            return Const(tuple(i.value for i in items))
        return tuple(items)

    # -- operators ----------------------------------------------------------------------
    def e_BinOp(self, node: ast.BinOp):
        op = BINOPS.get(type(node.op))
        if op is None:
            self.fail(node, f"operator {type(node.op).__name__}", "plain arithmetic")
        return self.arith(op, self.expr(node.left), self.expr(node.right), node)

    def e_UnaryOp(self, node: ast.UnaryOp):
        x = self.expr(node.operand)
        kind = type(node.op)
        if isinstance(x, Const):
            op = UNARYOPS[kind]
            return self.fold_unary(op, x, node)
        if isinstance(x, Val) and isinstance(x.ty, VecType) and kind is not ast.Not:
            return self.vec_unary(kind, x, node)
        val = self.value(x, node.operand)
        if kind is ast.USub:
            return negate(self.b, val, self.flags)
        if kind is ast.UAdd:
            return val
        if kind is ast.Not:
            t = truth(self.b, val)
            return Val(self.b.xor(t.ir, ir.Constant(u.I1, 1)), BOOL)
        if val.ty.is_float:
            self.fail(node, "`~` on a float", "an int")
        return invert(self.b, val)

    def e_IfExp(self, node: ast.IfExp):
        cond = self.expr(node.test)
        if isinstance(cond, Const):
            return self.expr(node.body if cond.value else node.orelse)
        cond = truth(self.b, self.value(cond, node.test))
        then = self.fn.append_basic_block("ifx.then")
        other = self.fn.append_basic_block("ifx.else")
        done = self.fn.append_basic_block("ifx.end")
        self.b.cbranch(cond.ir, then, other)
        self.b.position_at_end(then)
        a_val = self.value(self.expr(node.body), node.body)
        then_end = self.b.block
        self.b.position_at_end(other)
        c_val = self.value(self.expr(node.orelse), node.orelse)
        other_end = self.b.block
        ty = a_val.ty
        if a_val.ty != c_val.ty:  # a literal joins the other side's type; else it is an error
            weak, strong = (a_val, c_val) if a_val.weak else (c_val, a_val)
            if not weak.weak or (weak.ty.is_float and not strong.ty.is_float):
                self.fail(node, f"the branches are {a_val.ty} and {c_val.ty}",
                          "a cast on one branch")
            ty = strong.ty
            self.joins(a_val, c_val, node.body, node.orelse)
        incoming = []
        for block, val in ((then_end, a_val), (other_end, c_val)):
            self.b.position_at_end(block)
            incoming.append((convert(self.b, val, ty).ir, self.b.block))
            self.b.branch(done)
        self.b.position_at_end(done)
        phi = self.b.phi(ty.ir)
        for v, blk in incoming:
            phi.add_incoming(v, blk)
        return Val(phi, ty, a_val.weak and c_val.weak)

    # -- indexing -----------------------------------------------------------------------
    def e_Subscript(self, node: ast.Subscript):
        base = self.expr(node.value)
        if isinstance(base, Const) and isinstance(base.value, np.ndarray) \
                and not is_vector_constant(base.value):
            self.fail(node.value, f"`{ast.unparse(node.value)}` is a module-level numpy array: "
                      "a kernel reads module-level numbers, tuples and `simd.vector`s as "
                      "constants, not arrays", "a buffer parameter (the array passed in the "
                      f"call), or a tuple (`{ast.unparse(node.value)} = (...)`) for a small "
                      "constant table")
        if isinstance(base, Const) or isinstance(base, tuple):
            key = self.expr(node.slice)
            if not isinstance(key, Const) or not isinstance(key.value, int):
                self.fail(node.slice, f"`{ast.unparse(node.value)}` is a static tuple, "
                          "indexed by a run-time value",
                          "`for x in tuple:` (unrolled) or a buffer")
            seq = base.value if isinstance(base, Const) else base
            if not isinstance(seq, (tuple, list)):
                self.fail(node, f"`{ast.unparse(node.value)}` cannot be indexed")
            try:
                item = seq[key.value]
            except IndexError:
                self.fail(node, f"index {key.value} out of range for a static tuple of "
                          f"{len(seq)}")
            return item if isinstance(base, tuple) else Const(item)
        if isinstance(base, Val) and isinstance(base.ty, VecType):
            return self.lane(base, node)
        if not isinstance(base, BufRef):
            self.fail(node, f"`{ast.unparse(node.value)}` cannot be indexed")
        if is_slice(node):
            return self.slice_load(base, node)
        ptr = self.element(base, node)
        ty = base.ty.dtype
        raw = self.b.load(ptr, typ=ty.ir)
        return convert(self.b, Val(raw, ty), ty.compute)

    def store_item(self, target: ast.Subscript, value, base=None, at=None) -> None:
        """``target = value``; ``base`` and ``at`` (the element's address, or a slice's `Run`)
        when an ``op=`` has already evaluated them (Python evaluates its target once)."""
        base = self.expr(target.value) if base is None else base
        if not isinstance(base, BufRef):
            self.fail(target, f"`{ast.unparse(target.value)}` is not a buffer; only buffer "
                      "elements can be assigned")
        self.mark_written(base)
        if is_slice(target):
            return self.slice_store(base, target, value, at)
        ty = base.ty.dtype
        if isinstance(value, Const) and (bad := out_of_range(value.value, ty, True)) is not None:
            self.fail(target, *bad)
        val = self.value(value, target, want=ty.compute)
        if val.ty.is_float and ty.is_int:
            self.fail(target, f"storing {val.ty} into {ty} buffer '{base.name}'",
                      f"`{ty.compute}(...)` (truncates)")
        val = convert(self.b, val, ty.compute) if val.ty != ty.compute else val
        at = self.element(base, target) if at is None else at
        self.b.store(convert(self.b, val, ty).ir, at)

    def element(self, buf: BufRef, node: ast.Subscript) -> ir.Value:
        """Address of ``buf[i, j, ...]`` (checked against the extents in a debug build)."""
        idx_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(idx_nodes) != buf.ty.rank:
            self.fail(node, f"buffer '{buf.name}' has {buf.ty.rank} axes, indexed with "
                      f"{len(idx_nodes)}", f"`{buf.name}[{', '.join('ijkl'[:buf.ty.rank])}]`")
        offset = None
        for axis, (i_node, stride) in enumerate(zip(idx_nodes, buf.strides)):
            idx = self.index_value(i_node, node, buf, axis)
            if self.debug:
                self.check_index(buf, axis, idx, node)
            term = idx if _is_one(stride) else self.b.mul(idx, stride)
            offset = term if offset is None else self.b.add(offset, term)
        return self.b.gep(buf.ptr, [offset], inbounds=True, source_etype=buf.ty.dtype.ir)


def _is_one(v) -> bool:
    return isinstance(v, ir.Constant) and v.constant == 1


def _I64():
    from .types import I64

    return I64


_EXPR_HINTS = {
    "List": "a tuple `(a, b)` for static values, or `local(f32, n)` for an array",
    "ListComp": "a loop",
    "DictComp": "a loop",
    "SetComp": "a loop",
    "GeneratorExp": "a loop",
    "Dict": "separate variables",
    "Lambda": "a module-level helper decorated with @inline",
    "JoinedStr": "numbers only (kernels have no strings)",
    "Starred": "explicit arguments",
    "NamedExpr": "a separate assignment",
}

__all__ = ["ExprMixin", "BufType"]
