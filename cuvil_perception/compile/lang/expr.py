"""`Values`, the base of `lower.Lowerer`: the helpers every lowering function uses through
``lw``: a run-time `Val` of anything (`Values.value`), compile-time ints, indices and their
bounds checks (`Values.check_index`, debug builds), a call's arguments, element addresses and
stores, the resolution of module-level names, and ``x op y`` (`Values.arith`:
constants fold, with the run-time semantics, `folding`; vectors go to `vector_lower`; the rest
to `arith`) with the checks that join operands of two types.

The expressions themselves are lowered by `expressions` and `logic_lower`.
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from .arith import binop, convert, fpow, int_index, power
from .constants import is_vector_constant
from .fold_lower import fold
from .lane_lower import constant_vector
from .names import binding_lines, unbound
from .slice_lower import is_slice, slice_store
from .types import BOOL, BufType, Scalar, VecType
from .values import (BufRef, Const, UnknownExtent, Val, const_type, materialize,
                     out_of_range, wrapped_operand)
from .vector_lower import is_vector, vec_arith


class Values:
    """The `lower.Lowerer`'s own helpers: values, arithmetic, call arguments, index checks."""

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

    def coerce(self, val: Val, ty: Scalar, node, what: str) -> Val:
        """``val`` as ``ty`` where that is safe implicitly (literals, int -> wider int or float,
        f64 -> f32 stores); anything else needs an explicit cast."""
        if val.ty == ty:
            return val
        if isinstance(val.ty, VecType) or isinstance(ty, VecType):
            self.fail(node, f"{what} is {val.ty}, expected {ty}")
        ok = ((val.weak and (ty.is_float or not val.ty.is_float))  # 0.5 never becomes 0
              or (ty.is_float and not (val.ty.is_float and val.ty.bits > ty.bits))
              or (ty.is_int and val.ty.is_int and ty.bits >= val.ty.bits) or val.ty == BOOL)
        if not ok:
            self.fail(node, f"{what} is {val.ty}, expected {ty}", f"`{ty}(...)`")
        return convert(self.b, val, ty)

    def joins(self, a: Val, c: Val, a_node: ast.expr, c_node: ast.expr) -> None:
        """A constant operand that does not fit the i32 it joins is a compile error at the
        constant, not wrapped to 32 bits (`values.wrapped_operand`)."""
        if (bad := wrapped_operand(a, c)) is not None:
            at, message, ty = bad
            node, other = (a_node, c_node) if at == 0 else (c_node, a_node)
            lo, hi = -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
            self.fail(node, f"{message}, the type of `{ast.unparse(other)}` it joins",
                      f"`i64({ast.unparse(other)})` to compute in i64, or a value in [{lo}, {hi}]")

    def operand_values(self, x, x_node: ast.expr, y, y_node: ast.expr) -> tuple[Val, Val]:
        """The values of the operands ``x`` and ``y`` of a comparison (`joins`)."""
        a, c = self.value(x, x_node), self.value(y, y_node)
        self.joins(a, c, x_node, y_node)
        return a, c

    def arith(self, op: str, x, y, node):
        """``x op y`` on constants (folded) or values."""
        if isinstance(x, Const) and isinstance(y, Const):
            return fold(self, op, x, y, node)
        if is_vector(x) or is_vector(y):
            return vec_arith(self, op, x, y, node)
        xv = self.value(x, node)
        if op == "**":
            exponent = y.value if isinstance(y, Const) else None
            out = power(self.b, xv, exponent, self.flags)
            return out if out is not None else fpow(self.b, xv, self.value(y, node), self.flags)
        yv = self.value(y, node)
        self.joins(xv, yv, *_operand_nodes(node))
        try:
            return binop(self.b, op, xv, yv, self.flags)
        except TypeError as exc:
            self.fail(node, f"{exc} (operands {xv.ty} and {yv.ty})", "an explicit int cast")

    # -- names --------------------------------------------------------------------------
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
            return constant_vector(self, obj, node)
        return Const(obj)

    # -- indexing -----------------------------------------------------------------------
    def store_item(self, target: ast.Subscript, value, base=None, at=None) -> None:
        """``target = value``; ``base`` and ``at`` (the element's address, or a slice's `Run`)
        when an ``op=`` has already evaluated them (Python evaluates its target once)."""
        base = self.expr(target.value) if base is None else base
        if not isinstance(base, BufRef):
            self.fail(target, f"`{ast.unparse(target.value)}` is not a buffer; only buffer "
                      "elements can be assigned")
        self.mark_written(base)
        if is_slice(target):
            return slice_store(self, base, target, value, at)
        ty = base.ty.dtype
        val = self.element_value(value, target, ty, base.name)
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

    # -- a call's arguments, a debug build's index checks -------------------------------
    def args(self, node: ast.Call, n: int | tuple) -> list:
        """The lowered arguments of ``node``, which must have ``n`` of them (or one of the
        counts in the tuple ``n``)."""
        counts = n if isinstance(n, tuple) else (n,)
        if len(node.args) not in counts:
            self.fail(node, f"`{ast.unparse(node.func)}` takes {' or '.join(map(str, counts))} "
                      f"argument(s), got {len(node.args)}")
        return [self.expr(a) for a in node.args]

    def element_value(self, value, node, ty, buf_name: str) -> Val:
        """``value`` as a ``ty`` element to store into buffer ``buf_name`` (still in
        ``ty.compute``): a constant out of ``ty``'s range and a float into an int buffer are
        refused at ``node`` (one rule for element and region stores)."""
        if isinstance(value, Const) and (bad := out_of_range(value.value, ty, True)) is not None:
            self.fail(node, *bad)
        val = self.value(value, node, want=ty.compute)
        if val.ty.is_float and ty.is_int:
            self.fail(node, f"storing {val.ty} into {ty} buffer '{buf_name}'",
                      f"`{ty.compute}(...)` (truncates)")
        return val

    def check_index(self, buf: BufRef, axis: int, idx: ir.Value, node) -> None:
        """Out of range -> record (site, index) in the error record and return from the kernel."""
        extent = buf.extents[axis]
        if extent is None:
            bad = self.b.icmp_signed("<", idx, u.const_i64(0))
        else:
            bad = self.b.icmp_unsigned(">=", idx, extent)  # negatives are huge unsigned
        site = len(self.sites)
        self.sites.append((str(self.frame.src.where(node)), buf.name, axis))
        fail_block = self.fn.append_basic_block("oob")
        ok = self.fn.append_basic_block("inb")
        self.b.cbranch(bad, fail_block, ok)
        self.b.position_at_end(fail_block)
        record = [u.const_i64(site + 1), idx, extent if extent is not None else u.const_i64(-1)]
        for k, v in enumerate(record):
            u.store_at(self.b, v, self.err, k)
        ret = self.fn.function_type.return_type
        if isinstance(ret, ir.VoidType):
            self.b.ret_void()
        else:
            self.b.ret(ir.Constant(ret, 0.0 if isinstance(ret, (ir.FloatType, ir.DoubleType))
                                   else 0))
        self.b.position_at_end(ok)


def _operand_nodes(node) -> tuple:
    """The left and right operand of ``a op b`` or ``a op= b``."""
    if isinstance(node, ast.BinOp):
        return node.left, node.right
    return node.target, node.value


def _is_one(v) -> bool:
    return isinstance(v, ir.Constant) and v.constant == 1


__all__ = ["Values", "BufType"]
