"""Lowering of buffer slices as vector values: ``buf[i, j, a:b]`` (a read) is the
``Vec[T, b - a]`` of the elements ``a .. b - 1`` along the sliced axis, and
``buf[i, j, a:b] = v`` (a store) writes all lanes of ``v`` there; a scalar on the right is
broadcast, a tuple ``(x, y, z)`` is the vector of its items (numpy's ``row[:] = (x, y, z)``).

One axis is sliced, any of them, with a compile-time step (``a:b:s``, ``s >= 1``) and a
compile-time lane count: ``a:b`` with constants (``:`` is the whole static extent of the axis,
``a:`` up to it, ``:b`` from 0), or ``start:start + n`` with a run-time ``start`` and a
constant ``n`` (the same expression written twice). A run along the last axis with step 1 is
one vector load or store; any other slice (a column ``buf[a:b, j]``, every other element
``buf[i, 0:8:2]``) moves its lanes one element at a time. ``None`` as a bound or step is left
out, as in Python. Static bounds are checked at compile time against a static extent, lane by
lane (``1:9:2`` of 8 is lanes 1, 3, 5, 7), and never count from the end (``-4:`` is refused);
a bounds-checked build checks every scalar index and the slice's range at run time. Indices
are evaluated left to right, as in Python. Uncompiled, a slice read is a copy (see `slices`),
so it is a value in both modes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from llvmlite import ir

from .. import irutil as u
from .arith import int_index
from .lane_lower import build_vector
from .types import BOOL, COMPUTE, VecType
from .values import BufRef, Const, Val
from .vector_lower import broadcast, scalar_for

HINT = ("`buf[i, a:b]` (`a`, `b` and a step `a:b:s` constants) or `buf[i, k:k + n]` "
        "(`n` constant), on one axis")
MAX_LANES = 256


@dataclass(frozen=True)
class Run:
    """Where a slice's lanes are: lane k is element ``first + k * stride`` of the buffer (flat
    indices, i64 values); ``contiguous`` when the stride is 1 (one vector load or store)."""

    first: ir.Value
    lanes: int
    stride: ir.Value
    contiguous: bool


def is_slice(node: ast.Subscript) -> bool:
    """Whether a subscript has a slice among its indices."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(i, ast.Slice) for i in items)


def slice_elem(lw, buf: BufRef, node: ast.Subscript):
    if buf.ty.dtype not in COMPUTE or buf.ty.dtype == BOOL:
        lw.fail(node, f"a slice of {buf.ty.dtype} buffer '{buf.name}'",
                "a buffer of f32, f64, i32 or i64 (or scalar elements)")
    return buf.ty.dtype


def slice_run(lw, buf: BufRef, node: ast.Subscript) -> Run:
    """Where the lanes of ``buf[..., a:b:s, ...]`` are."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    rank = buf.ty.rank
    if len(items) != rank:
        lw.fail(node, f"buffer '{buf.name}' has {rank} axes, indexed with {len(items)}",
                HINT)
    axes = [k for k, item in enumerate(items) if isinstance(item, ast.Slice)]
    if len(axes) > 1:
        lw.fail(node, "a slice on more than one axis (a vector has one dimension)",
                "one slice and scalar indices, e.g. `buf[i, a:b]`")
    axis = axes[0]
    indices = {}  # left to right, as Python: a helper in one may write what the next reads
    for k, item in enumerate(items):
        if k == axis:
            start, lanes, step = slice_bounds(lw, buf, item, node, axis)
            continue
        indices[k] = lw.index_value(item, node, buf, k)
        if lw.debug:
            lw.check_index(buf, k, indices[k], node)
    first = lw.b.mul(start, buf.strides[axis])
    for k, idx in indices.items():
        first = lw.b.add(first, lw.b.mul(idx, buf.strides[k]))
    contiguous = axis == rank - 1 and step == 1
    stride = lw.b.mul(buf.strides[axis], u.const_i64(step))
    return Run(first, lanes, stride, contiguous)


def slice_part(lw, node: ast.expr | None):
    """A bound or the step of a slice, evaluated; None when it is left out or is None
    (``None:4``, ``0:END`` with ``END = None`` at module level), as in Python."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None  # (a None literal is no kernel value: `lower_constant` refuses it)
    value = lw.expr(node)
    return None if isinstance(value, Const) and value.value is None else value


def slice_step(lw, sliced: ast.Slice) -> int:
    step = slice_part(lw, sliced.step)
    if step is None:
        return 1
    if not (isinstance(step, Const) and type(step.value) is int and 1 <= step.value < 2**63):
        lw.fail(sliced, f"slice step `{ast.unparse(sliced.step)}`: a step must be a "
                "compile-time int >= 1 (below 2**63)", HINT)
    return step.value


def slice_bounds(lw, buf: BufRef, sliced: ast.Slice, node,
                 axis: int) -> tuple[ir.Value, int, int]:
    """(the start as an i64 value, the constant lane count, the step), range-checked; the
    start, stop and step evaluated in that order, as Python does."""
    extent = buf.extents[axis]
    static = extent.constant if isinstance(extent, ir.Constant) else None
    lower = slice_part(lw, sliced.lower)
    lower = Const(0) if lower is None else lower
    if isinstance(lower, Const):
        upper = slice_part(lw, sliced.upper)
        if upper is None and static is None:
            lw.fail(sliced, f"`:` needs a static extent; axis {axis} of '{buf.name}' "
                    "has a run-time one", "`a:b` with constants")
        upper = Const(static) if upper is None else upper
    else:  # a run-time start: the length must be static, `start:start + n`
        length = run_time_length(lw, sliced)
        if length is None:
            lw.fail(sliced, f"slice `{ast.unparse(sliced)}` has no compile-time length",
                    HINT)
        step = slice_step(lw, sliced)
        lanes = len(range(0, length, step))
        start = slice_start(lw, buf, sliced, lower, node, static, lanes, axis, step)
        return start, lanes, step
    step = slice_step(lw, sliced)
    if not all(isinstance(v, Const) and type(v.value) is int for v in (lower, upper)):
        lw.fail(sliced, f"slice bounds `{ast.unparse(sliced)}` must be compile-time ints",
                HINT)
    a, b = lower.value, upper.value
    lanes = constant_lanes(lw, buf, sliced, axis, static, a, b, step)
    if static is None and extent is not None and lw.debug:
        # constant lanes on a run-time extent: the last one is the index to check
        lw.check_index(buf, axis, u.const_i64(a + (lanes - 1) * step), node)
    return u.const_i64(a), lanes, step


def constant_lanes(lw, buf: BufRef, sliced: ast.Slice, axis: int, static: int | None,
                   a: int, b: int, step: int, limit: int | None = MAX_LANES) -> int:
    """The lane count of ``a:b:step`` (constants), every lane inside a static extent, at
    most ``limit`` (a vector's; a region store has none)."""
    lanes = -((a - b) // step)  # len(range(a, b, step)), which overflows past 2**63
    last = a + (lanes - 1) * step  # (a stop past the extent is fine, as numpy: `1:9:2` of 8)
    if 0 <= a < b < 2**63 and (static is None or last < static) and (
            limit is None or lanes <= limit):
        return lanes
    tail = f":{step}" if step != 1 else ""
    if (a < 0 or b < 0) and static is not None:
        start, stop = (v + static if v < 0 else v for v in (a, b))  # (what Python takes)
        if 0 <= start < stop <= static:
            lw.fail(sliced, f"negative bound in slice `{ast.unparse(sliced)}` on axis "
                    f"{axis} of '{buf.name}' (extent {static}): kernels do not count "
                    "from the end as Python does", f"`{start}:{stop}{tail}`")
    most = f", at most {limit} lanes" if limit is not None else ""
    lw.fail(sliced, f"slice `{a}:{b}{tail}` out of range for axis {axis} of '{buf.name}' "
            f"(extent {static if static is not None else 'run-time'}{most})",
            f"`a:b` with 0 <= a < b <= {static}" if static is not None
            else f"`a:b` with 0 <= a < b{most}")


def run_time_length(lw, sliced: ast.Slice) -> int | None:
    up = sliced.upper
    if not (isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add)
            and ast.dump(up.left) == ast.dump(sliced.lower)):
        return None
    for call in ast.walk(sliced.lower):  # Python calls it twice: start, then stop
        if isinstance(call, ast.Call) and calls_helper(lw, call):
            lw.fail(sliced, f"slice `{ast.unparse(sliced)}` calls helper "
                    f"`{ast.unparse(call.func)}` for its start and again for its stop",
                    f"its value bound to a name first: `s = {ast.unparse(call)}`, then "
                    "`[s:s + n]`")
    n = lw.expr(up.right)
    ok = isinstance(n, Const) and type(n.value) is int and 1 <= n.value <= MAX_LANES
    return n.value if ok else None


def calls_helper(lw, call: ast.Call) -> bool:
    """Whether ``call`` is a call of an @inline helper or another kernel (which may store)."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)) or (
            isinstance(call.func, ast.Name) and call.func.id in lw.frame.env):
        return False
    fn = lw.resolve(call.func).value
    fn = getattr(fn, "py_func", fn)  # another @kernel: the decorated name is its Kernel
    return getattr(fn, "__cuvil_inline__", False) or hasattr(fn, "__cuvil_kernel__")


def slice_start(lw, buf, sliced: ast.Slice, lower, node, static, lanes: int, axis: int,
                step: int) -> ir.Value:
    span = (lanes - 1) * step + 1
    if static is not None and span > static:
        lw.fail(sliced, f"a slice of {lanes} lanes is longer than axis {axis} of "
                f"'{buf.name}' ({static})")
    start = lw.value(lower, sliced.lower)
    if start.ty.is_float:
        lw.fail(sliced.lower, f"`{ast.unparse(sliced.lower)}` is {start.ty}, a slice "
                "start must be an int", f"`i64({ast.unparse(sliced.lower)})`")
    start = int_index(lw.b, start)
    if lw.debug:
        check_range(lw, buf, start, lanes, node, axis, step)
    return start


def check_range(lw, buf: BufRef, start: ir.Value, lanes: int, node, axis: int,
                step: int) -> None:
    """Debug builds: every lane's index, ``start + k * step`` for ``k < lanes``, inside the
    axis."""
    span = (lanes - 1) * step + 1
    extent = buf.extents[axis]  # None: an unknown extent (`Buf[f32, None]`), start >= 0
    limit = None if extent is None else lw.b.sub(extent, u.const_i64(span - 1))
    extents = tuple(limit if k == axis else e for k, e in enumerate(buf.extents))
    name = f"{buf.name} (the start of a slice of {lanes})"
    lw.check_index(BufRef(buf.ptr, buf.ty, extents, buf.strides, name), axis, start, node)


def lane_address(lw, buf: BufRef, run: Run, k: int) -> ir.Value:
    at = lw.b.add(run.first, lw.b.mul(run.stride, u.const_i64(k)))
    return u.gep(lw.b, buf.ptr, at, buf.ty.dtype.ir)


def slice_load(lw, buf: BufRef, node: ast.Subscript, run: Run | None = None) -> Val:
    elem = slice_elem(lw, buf, node)
    run = slice_run(lw, buf, node) if run is None else run
    vty = VecType(elem, run.lanes)
    if run.contiguous:
        return Val(u.load_vec(lw.b, buf.ptr, run.first, vty.ir), vty)
    vector = ir.Constant(vty.ir, ir.Undefined)
    for k in range(run.lanes):
        lane = lw.b.load(lane_address(lw, buf, run, k), typ=vty.elem.ir)
        vector = lw.b.insert_element(vector, lane, u.const_i32(k))
    return Val(vector, vty)


def slice_store(lw, buf: BufRef, target: ast.Subscript, value,
                run: Run | None = None) -> None:
    elem = slice_elem(lw, buf, target)
    run = slice_run(lw, buf, target) if run is None else run
    vty = VecType(elem, run.lanes)
    vector = slice_value(lw, buf, target, value, vty)
    if run.contiguous:
        lw.b.store(vector, u.gep(lw.b, buf.ptr, run.first, vty.elem.ir),
                   align=vty.elem.bits // 8)
        return
    for k in range(run.lanes):
        lane = lw.b.extract_element(vector, u.const_i32(k))
        lw.b.store(lane, lane_address(lw, buf, run, k))


def slice_value(lw, buf: BufRef, target, value, vty: VecType) -> ir.Value:
    """The vector a slice store writes: ``value`` itself, a scalar broadcast, or a tuple's
    items as lanes."""
    if isinstance(value, Val) and isinstance(value.ty, VecType):
        if value.ty != vty:
            lw.fail(target, f"storing a {value.ty} into a slice of {vty.lanes} "
                    f"{vty.elem} ('{buf.name}')", f"a {vty}")
        return value.ir
    items = value.value if isinstance(value, Const) else value
    if isinstance(items, (tuple, list)):
        if len(items) != vty.lanes:
            lw.fail(target, f"storing {len(items)} values into a slice of {vty.lanes} "
                    f"{vty.elem} ('{buf.name}')", f"a tuple of {vty.lanes}")
        if isinstance(value, Const):
            items = [Const(v) for v in items]
        return build_vector(lw, vty, items, target)
    return broadcast(lw, scalar_for(lw, vty, value, target), vty)


def slice_operand(lw, buf: BufRef, target, value, vty: VecType):
    """The right side of ``buf[i, a:b] op= value``: a tuple ``(x, y)`` is the vector of its
    items as lanes of the buffer's type (as numpy's ``row[0:2] += (x, y)``, and as a slice
    store takes it); anything else as is, for the operator to check."""
    items = value.value if isinstance(value, Const) else value
    if not isinstance(items, (tuple, list)):
        return value
    return Val(slice_value(lw, buf, target, value, vty), vty)


__all__ = ["is_slice"]
