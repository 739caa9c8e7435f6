"""Region stores: a slice store that is not one vector, lowered to nested counted loops.

``img[:, :] = -1.0``, ``img[:] = 0`` (a 2-d buffer: ``:`` for every axis not indexed, as
numpy), ``x[0:1000] = 0.0``, ``img[0:h, 0:w] = 0`` (run-time bounds), ``img[:, :] += 1.0``,
``a[2:5, 1:3] = b[0:3, 4:6]`` and ``a[i, :] = b[:, j]`` (a copy, element by element). A store
is a region store when its target slices more than one axis, indexes fewer axes than the
buffer has, or slices one axis with a lane count that is not a compile-time constant up to
`slice_lower.MAX_LANES` (run-time bounds, ``:`` of a run-time extent, more lanes); every other
slice store is one vector (`slice_lower`). Any extent, no lane limit: the inner loop runs along
the last sliced axis, which LLVM vectorises.

The right side is a number (broadcast: converted once, as an element store converts it) or a
slice of another buffer with the same number of sliced axes and the same count on each (numpy
would also broadcast; write the loop for that). Constant counts that differ are a compile error
at the statement; run-time ones are checked in a bounds-checked build (the copy would read past
the source), as is every index of both regions. Python's order: the right side's indices, then
the target's, left to right. A copy within one buffer is refused (the loops would read elements
they already wrote where the two regions overlap; numpy copies through a temporary).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from llvmlite import ir

from .. import irutil as u
from .arith import convert
from .slice_lower import MAX_LANES, constant_lanes, is_slice, slice_part, slice_step
from .types import F32, F64, I32, I64 as _I64, VecType
from .values import BufRef, Const, Val

VECTOR_ELEMS = (F32, F64, I32, _I64)
HINT = "a number, or a slice of another buffer with the same shape (`dst[a:b, :] = src[c:d, :]`)"


@dataclass(frozen=True)
class Axis:
    """One sliced axis of a region: lane k is index ``start + k * step`` on ``axis``."""

    axis: int
    start: ir.Value
    count: ir.Value  # i64, >= 0
    step: int
    static: int | None  # the count when it is a compile-time int


@dataclass(frozen=True)
class Region:
    """The elements a multi-axis slice names: ``base`` (the flat offset of the scalar
    indices) plus one term per sliced axis."""

    buf: BufRef
    base: ir.Value
    axes: tuple
    text: str

    @property
    def shape(self) -> tuple:
        return tuple("?" if a.static is None else a.static for a in self.axes)


def _items(node: ast.Subscript) -> list:
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def _pure(node) -> bool:
    return node is None or not any(isinstance(n, ast.Call) for n in ast.walk(node))


def region_store(lw, target: ast.expr, value_node: ast.expr, op: str | None,
                 node) -> bool:
    """Lower ``target = value`` (``op=`` when ``op``) if it is a region store (``buf[1]``
    of a 2-d buffer, without a slice, is one: a row); whether it was."""
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
        return False
    buf = lw.expr(target.value)  # (a name: no effects)
    if not isinstance(buf, BufRef) or not (is_slice(target) or len(_items(target)) <
                                           buf.ty.rank) or not is_region(lw, buf, target,
                                                                         value_node):
        return False
    source = region_source(lw, value_node)
    dst = region(lw, buf, target)
    lw.mark_written(buf)
    if isinstance(source, Region):
        check_shapes(lw, source, dst, node)
        if source.buf.ptr is dst.buf.ptr:
            lw.fail(node, f"a copy within one buffer ('{buf.name}'): the loops would "
                    "read elements they already wrote where the regions overlap",
                    "a copy through a second buffer or a `local` array")
    else:
        source = region_scalar(lw, source, value_node, dst, op)
    nest(lw, dst, source, op, node)
    return True


def is_region(lw, buf: BufRef, target: ast.Subscript, value_node: ast.expr) -> bool:
    """Whether ``target = value`` is a region store (the module docstring says when)."""
    items = _items(target)
    sliced = [i for i in items if isinstance(i, ast.Slice)]
    if len(items) > buf.ty.rank:
        return False  # (`slice_run` says so)
    if len(items) < buf.ty.rank or len(sliced) > 1 or buf.ty.dtype not in VECTOR_ELEMS:
        return True  # (a vector holds f32 f64 i32 i64: `u8` buffers store element-wise)
    if copied_type(lw, value_node) not in (None, buf.ty.dtype):
        return True  # a copy from a buffer of another type: element by element
    (s,) = sliced
    up = s.upper
    if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add) \
            and ast.dump(up.left) == ast.dump(s.lower):
        return False  # `k:k + n`: one vector
    if not all(_pure(p) for p in (s.lower, s.upper, s.step)):
        return False
    lower, upper = slice_part(lw, s.lower), slice_part(lw, s.upper)
    step = slice_part(lw, s.step)
    if not all(v is None or isinstance(v, Const) for v in (lower, upper, step)):
        return True  # run-time bounds
    axis = items.index(s)
    extent = buf.extents[axis]
    if upper is None:
        if not isinstance(extent, ir.Constant):
            return extent is not None  # `:` of a run-time extent
        upper = Const(extent.constant)
    a = 0 if lower is None else lower.value
    values = (a, upper.value, 1 if step is None else step.value)
    if not all(type(v) is int for v in values) or values[2] < 1:
        return False
    return -((values[0] - values[1]) // values[2]) > MAX_LANES  # (len(range): overflows)


def copied_type(lw, value_node: ast.expr):
    """The element type of the buffer ``value_node`` slices, or None."""
    if isinstance(value_node, ast.Subscript) and isinstance(value_node.value, ast.Name) \
            and is_slice(value_node):
        src = lw.expr(value_node.value)
        return src.ty.dtype if isinstance(src, BufRef) else None
    return None


def region_source(lw, value_node: ast.expr):
    """The right side: a `Region` when it is a slice of a buffer, else its value."""
    if isinstance(value_node, ast.Subscript) and isinstance(value_node.value, ast.Name) \
            and is_slice(value_node):
        src = lw.expr(value_node.value)
        if isinstance(src, BufRef):
            return region(lw, src, value_node)
    return lw.expr(value_node)


def region(lw, buf: BufRef, node: ast.Subscript) -> Region:
    """``buf[...]``'s elements: indices evaluated left to right, each slice's start,
    stop and step in that order; axes not indexed are ``:``."""
    items = list(_items(node)) + [ast.Slice()] * (buf.ty.rank - len(_items(node)))
    base, axes = u.const_i64(0), []
    for k, item in enumerate(items):
        if isinstance(item, ast.Slice):
            axes.append(region_axis(lw, buf, item, node, k))
            start = axes[-1].start
        else:
            start = lw.index_value(item, node, buf, k)
            if lw.debug:
                lw.check_index(buf, k, start, node)
        base = lw.b.add(base, lw.b.mul(start, buf.strides[k]))
    return Region(buf, base, tuple(axes), ast.unparse(node))


def region_axis(lw, buf: BufRef, sliced: ast.Slice, node, axis: int) -> Axis:
    extent = buf.extents[axis]
    lower = slice_part(lw, sliced.lower)
    upper = slice_part(lw, sliced.upper)
    step = slice_step(lw, sliced)
    if upper is None:
        if extent is None:
            lw.fail(sliced, f"`:` on axis {axis} of '{buf.name}', whose extent is not "
                    "known (`None`)", "a stop, `a:b`")
        upper = Const(extent.constant) if isinstance(extent, ir.Constant) else Val(extent,
                                                                                  _I64)
    lower = Const(0) if lower is None else lower
    if isinstance(lower, Const) and isinstance(upper, Const) \
            and type(lower.value) is int and type(upper.value) is int:
        static = extent.constant if isinstance(extent, ir.Constant) else None
        lanes = constant_lanes(lw, buf, sliced, axis, static, lower.value, upper.value,
                               step, limit=None)
        start, count = u.const_i64(lower.value), u.const_i64(lanes)
        if static is None and extent is not None and lw.debug:
            lw.check_index(buf, axis, u.const_i64(lower.value + (lanes - 1) * step), node)
        return Axis(axis, start, count, step, lanes)
    start = bound(lw, lower, sliced.lower or sliced)
    stop = bound(lw, upper, sliced.upper or sliced)
    span = lw.b.sub(stop, start)
    count = lw.b.sdiv(lw.b.add(span, u.const_i64(step - 1)), u.const_i64(step))
    count = lw.b.select(lw.b.icmp_signed(">", span, u.const_i64(0)), count,
                        u.const_i64(0))
    if lw.debug:  # the first and the last lane, when there is one
        some = lw.b.icmp_signed(">", count, u.const_i64(0))
        last = lw.b.add(start, lw.b.mul(lw.b.sub(count, u.const_i64(1)),
                                        u.const_i64(step)))
        for idx in (start, last):
            lw.check_index(buf, axis, lw.b.select(some, idx, u.const_i64(0)), node)
    return Axis(axis, start, count, step, None)


def bound(lw, value, node) -> ir.Value:
    val = lw.value(value, node)
    if val.ty.is_float:
        lw.fail(node, f"`{ast.unparse(node)}` is {val.ty}, a slice bound must be an int",
                f"`i64({ast.unparse(node)})`")
    return convert(lw.b, val, _I64).ir


def check_shapes(lw, src: Region, dst: Region, node) -> None:
    """Same number of sliced axes, same count on each: compile time where both are
    constants, else (a bounds-checked build) at run time, each way."""
    if len(src.axes) != len(dst.axes) or any(
            a.static is not None and b.static is not None and a.static != b.static
            for a, b in zip(src.axes, dst.axes)):
        lw.fail(node, f"shape mismatch: `{dst.text}` is {_shape(dst)} but `{src.text}` is "
                f"{_shape(src)}", "slices of one shape on both sides")
    if not lw.debug:
        return
    for k, (a, b) in enumerate(zip(src.axes, dst.axes)):
        if a.static is None or b.static is None:
            for one, other in ((a, b), (b, a)):  # one.count <= other.count, both ways
                name = f"the lanes of `{dst.text}` = `{src.text}` (sliced axis {k})"
                ref = BufRef(src.buf.ptr, src.buf.ty, (lw.b.add(other.count, u.const_i64(
                    1)),) * src.buf.ty.rank, src.buf.strides, name)
                lw.check_index(ref, 0, one.count, node)


def region_scalar(lw, value, value_node, dst: Region, op: str | None):
    """A number stored into every element: checked and converted once."""
    ty = dst.buf.ty.dtype
    if isinstance(value, Val) and isinstance(value.ty, VecType) or not (
            isinstance(value, Val) or isinstance(value, Const)
            and isinstance(value.value, (bool, int, float))):
        lw.fail(value_node, f"`{ast.unparse(value_node)}` stored into `{dst.text}` (a "
                f"region of {_shape(dst)} {ty} elements)", HINT)
    if op is not None:
        return value
    val = lw.element_value(value, value_node, ty, dst.buf.name)
    return convert(lw.b, val, ty.compute)


def nest(lw, dst: Region, source, op: str | None, node) -> None:
    """The loops: one per sliced axis, outermost first; each element of ``dst`` gets
    ``source`` (a `Val` or the matching element of a `Region`), combined by ``op``."""
    def level(depth: int, offsets: tuple) -> None:
        if depth == len(dst.axes):
            return region_element(lw, dst, source, offsets, op, node)
        counted_loop(lw, dst.axes[depth].count,
                     lambda k: level(depth + 1, offsets + (k,)))
    level(0, ())


def region_element(lw, dst: Region, source, offsets: tuple, op, node) -> None:
    ty = dst.buf.ty.dtype
    value = source
    if isinstance(source, Region):
        at = region_address(lw, source, offsets)
        sty = source.buf.ty.dtype
        value = convert(lw.b, Val(lw.b.load(at, typ=sty.ir), sty), sty.compute)
    at = region_address(lw, dst, offsets)
    if op is not None:
        current = convert(lw.b, Val(lw.b.load(at, typ=ty.ir), ty), ty.compute)
        value = lw.arith(op, current, value, node)
        value = lw.value(value, node)
    if value.ty.is_float and ty.is_int:
        lw.fail(node, f"storing {value.ty} into {ty} buffer '{dst.buf.name}'",
                f"`{ty.compute}(...)` (truncates)")
    lw.b.store(convert(lw.b, convert(lw.b, value, ty.compute), ty).ir, at)


def region_address(lw, region: Region, offsets: tuple) -> ir.Value:
    flat = region.base
    for a, k in zip(region.axes, offsets):
        index = lw.b.mul(k, u.const_i64(a.step))
        flat = lw.b.add(flat, lw.b.mul(index, region.buf.strides[a.axis]))
    return u.gep(lw.b, region.buf.ptr, flat, region.buf.ty.dtype.ir)


def counted_loop(lw, count: ir.Value, body) -> None:
    """``for k in range(count): body(k)`` in the canonical form LLVM vectorises (an i64
    phi from 0, one latch)."""
    pre = lw.b.block
    head = lw.fn.append_basic_block("region.head")
    loop = lw.fn.append_basic_block("region.body")
    done = lw.fn.append_basic_block("region.end")
    lw.b.branch(head)
    lw.b.position_at_end(head)
    k = lw.b.phi(u.I64, name="region.k")
    k.add_incoming(u.const_i64(0), pre)
    lw.b.cbranch(lw.b.icmp_signed("<", k, count), loop, done)
    lw.b.position_at_end(loop)
    body(k)
    k.add_incoming(lw.b.add(k, u.const_i64(1), flags=("nsw",)), lw.b.block)
    lw.b.branch(head)
    lw.b.position_at_end(done)


def _shape(region: Region) -> str:
    return f"({', '.join(map(str, region.shape))}{',' if len(region.shape) == 1 else ''})"
