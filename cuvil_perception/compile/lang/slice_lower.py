"""Lowering of buffer slices as vector values: ``buf[i, j, a:b]`` (a read) is the
``Vec[T, b - a]`` of the contiguous elements ``a .. b - 1`` of the last axis (one vector load,
as ``simd.load``), and ``buf[i, j, a:b] = v`` (a store) writes all lanes of ``v`` there, a
scalar on the right being broadcast.

The slice must be on the last axis, with step 1 and a compile-time length: ``a:b`` with
constants (``:`` is the whole static last extent, ``a:`` up to it, ``:b`` from 0), or
``start:start + n`` with a run-time ``start`` and a constant ``n`` (the same expression written
twice). Static bounds are checked at compile time against a static extent; a bounds-checked
build checks every scalar index and the slice's range at run time. Uncompiled, a slice read is
a copy (see `slices`), so it is a value in both modes.
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from .arith import int_index
from .types import BOOL, COMPUTE, VecType
from .values import BufRef, Const, Val

HINT = "`buf[i, a:b]` (last axis, step 1, `a`, `b` constants) or `buf[i, k:k + n]` (`n` constant)"


def is_slice(node: ast.Subscript) -> bool:
    """Whether a subscript has a slice among its indices."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(i, ast.Slice) for i in items)


class SliceMixin:
    """Buffer slices for `lower.Lowerer`."""

    def slice_elem(self, buf: BufRef, node: ast.Subscript):
        if buf.ty.dtype not in COMPUTE or buf.ty.dtype == BOOL:
            self.fail(node, f"a slice of {buf.ty.dtype} buffer '{buf.name}'",
                      "a buffer of f32, f64, i32 or i64 (or scalar elements)")
        return buf.ty.dtype

    def slice_at(self, buf: BufRef, node: ast.Subscript) -> tuple[ir.Value, int]:
        """(flat element index of the first lane, lane count) of ``buf[..., a:b]``."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rank = buf.ty.rank
        if len(items) != rank:
            self.fail(node, f"buffer '{buf.name}' has {rank} axes, indexed with {len(items)}",
                      HINT)
        *scalars, last = items
        if not isinstance(last, ast.Slice) or any(isinstance(i, ast.Slice) for i in scalars):
            self.fail(node, "a slice is only supported on the last axis (a contiguous run)",
                      HINT)
        if last.step is not None:
            step = self.expr(last.step)
            if not (isinstance(step, Const) and step.value == 1):
                self.fail(last, f"slice step `{ast.unparse(last.step)}`: only step 1 is "
                          "supported", HINT)
        start, lanes = self.slice_bounds(buf, last, node)
        offset = start
        for axis, (i_node, stride) in enumerate(zip(scalars, buf.strides)):
            idx = self.index_value(i_node, node, buf, axis)
            if self.debug:
                self.check_index(buf, axis, idx, node)
            offset = self.b.add(offset, self.b.mul(idx, stride))
        return offset, lanes

    def slice_bounds(self, buf: BufRef, last: ast.Slice, node) -> tuple[ir.Value, int]:
        """(the start as an i64 value, the constant lane count), range-checked."""
        extent = buf.extents[-1]
        static = extent.constant if isinstance(extent, ir.Constant) else None
        lower = Const(0) if last.lower is None else self.expr(last.lower)
        if last.upper is None:
            if static is None:
                self.fail(last, f"`:` needs a static last extent; '{buf.name}' has a run-time "
                          "one", "`a:b` with constants")
            upper = Const(static)
        elif isinstance(lower, Const):
            upper = self.expr(last.upper)
        else:  # a run-time start: the length must be static, `start:start + n`
            upper = self.run_time_length(last)
            if upper is None:
                self.fail(last, f"slice `{ast.unparse(last)}` has no compile-time length",
                          HINT)
            return self.slice_start(buf, last, lower, node, static, upper), upper
        if not all(isinstance(v, Const) and type(v.value) is int for v in (lower, upper)):
            self.fail(last, f"slice bounds `{ast.unparse(last)}` must be compile-time ints",
                      HINT)
        a, b = lower.value, upper.value
        if not 0 <= a < b or (static is not None and b > static) or b - a > 256:
            self.fail(last, f"slice `{a}:{b}` out of range for the last axis of '{buf.name}' "
                      f"(extent {static if static is not None else 'run-time'}, at most 256 "
                      "lanes)", f"`a:b` with 0 <= a < b <= {static}")
        if static is None and self.debug:
            self.check_range(buf, u.const_i64(a), b - a, node)
        return u.const_i64(a), b - a

    def run_time_length(self, last: ast.Slice) -> int | None:
        up = last.upper
        if not (isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add)
                and ast.dump(up.left) == ast.dump(last.lower)):
            return None
        n = self.expr(up.right)
        ok = isinstance(n, Const) and type(n.value) is int and 1 <= n.value <= 256
        return n.value if ok else None

    def slice_start(self, buf, last: ast.Slice, lower, node, static, lanes: int) -> ir.Value:
        if static is not None and lanes > static:
            self.fail(last, f"a slice of {lanes} lanes is longer than the last axis of "
                      f"'{buf.name}' ({static})")
        start = self.value(lower, last.lower)
        if start.ty.is_float:
            self.fail(last.lower, f"`{ast.unparse(last.lower)}` is {start.ty}, a slice start "
                      "must be an int", f"`i64({ast.unparse(last.lower)})`")
        start = int_index(self.b, start)
        if self.debug:
            self.check_range(buf, start, lanes, node)
        return start

    def check_range(self, buf: BufRef, start: ir.Value, lanes: int, node) -> None:
        """Debug builds: ``[start, start + lanes)`` inside the last axis."""
        limit = self.b.sub(buf.extents[-1], u.const_i64(lanes - 1))
        axis = buf.ty.rank - 1
        extents = tuple(limit if k == axis else e for k, e in enumerate(buf.extents))
        name = f"{buf.name} (the start of a slice of {lanes})"
        self.check_index(BufRef(buf.ptr, buf.ty, extents, buf.strides, name), axis, start, node)

    def slice_load(self, buf: BufRef, node: ast.Subscript) -> Val:
        elem = self.slice_elem(buf, node)
        offset, lanes = self.slice_at(buf, node)
        vty = VecType(elem, lanes)
        return Val(u.load_vec(self.b, buf.ptr, offset, vty.ir), vty)

    def slice_store(self, buf: BufRef, target: ast.Subscript, value) -> None:
        elem = self.slice_elem(buf, target)
        offset, lanes = self.slice_at(buf, target)
        vty = VecType(elem, lanes)
        if isinstance(value, Val) and isinstance(value.ty, VecType):
            if value.ty != vty:
                self.fail(target, f"storing a {value.ty} into a slice of {vty.lanes} "
                          f"{vty.elem} ('{buf.name}')", f"a {vty}")
            vector = value.ir
        else:
            vector = self.broadcast(self.scalar_for(vty, value, target), vty)
        self.b.store(vector, u.gep(self.b, buf.ptr, offset, vty.elem.ir),
                     align=vty.elem.bits // 8)


__all__ = ["SliceMixin", "is_slice"]
