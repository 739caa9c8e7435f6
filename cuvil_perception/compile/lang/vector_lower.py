"""Lowering of vector values (``Vec[T, n]``): the `simd` value operations, operators and
comparisons on vectors, lane access ``v[k]`` and `kmath` functions lane-wise. What each one
means is in `simd`; this module only renders it (one LLVM vector instruction each, except the
reductions, which are the documented tree of shuffles)."""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from . import simd
from .arith import _float_op, common, convert
from .scope import Var
from .simd_lower import buffer_arg, check_flat, index_of, stream_target
from .types import BOOL, COMPUTE, Vec, VecType, vec_type
from .values import Const, Val


def is_vector(x) -> bool:
    return isinstance(x, Val) and isinstance(x.ty, VecType)


# -- checks and conversions -----------------------------------------------------------
def as_vector(lw, x, node) -> Val:
    if not is_vector(x):
        lw.fail(node, f"`{ast.unparse(node)}` is not a vector",
                "a vector (`simd.load(buf, at, n)`, `simd.splat(x, n)`)")
    return x


def vlanes(lw, n, node) -> int:
    if not (isinstance(n, Const) and isinstance(n.value, int)) or isinstance(n.value, bool):
        lw.fail(node, "a lane count must be a compile-time int")
    try:
        return vec_type(BOOL, n.value).lanes
    except TypeError as exc:
        lw.fail(node, str(exc))


def local_type(lw, node: ast.expr):
    """The type of an annotated local: a scalar, or ``Vec[T, n]``."""
    if not isinstance(node, ast.Subscript):
        return lw.scalar_annotation(node)
    base = lw.resolve(node.value).value
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = [lw.expr(i) for i in items]
    if base is not Vec or not all(isinstance(v, Const) for v in values):
        lw.fail(node, f"`{ast.unparse(node)}` is not a local type",
                "a scalar type or `Vec[f32, 16]` (compile-time lane count)")
    try:
        return vec_type(*(v.value for v in values))
    except TypeError as exc:
        lw.fail(node, str(exc))


def scalar_for(lw, vty: VecType, x, node) -> ir.Value:
    """A scalar operand of a vector operation, as the vector's element type: a literal
    adapts, a run-time value must already have that type."""
    val = lw.value(x, node, want=vty.elem)
    if val.ty != vty.elem:
        lossy = val.ty.is_float and not vty.elem.is_float
        if not val.weak or lossy:
            lw.fail(node, f"a {val.ty} scalar with a {vty}",
                    f"a cast of the scalar to {vty.elem}, `{vty.elem}(...)`")
        val = convert(lw.b, val, vty.elem)
    return val.ir


def broadcast(lw, scalar: ir.Value, vty: VecType) -> ir.Value:
    if isinstance(scalar, ir.Constant):
        return ir.Constant(vty.ir, [scalar] * vty.lanes)
    undef = ir.Constant(vty.ir, ir.Undefined)
    one = lw.b.insert_element(undef, scalar, u.const_i32(0))
    return lw.b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, vty.lanes),
                                                       [0] * vty.lanes))


def operands(lw, x, y, node, lanes: int | None = None) -> tuple[Val, Val]:
    """Two operands as vectors of one type: a scalar side is broadcast."""
    vecs = [v for v in (x, y) if is_vector(v)]
    if len(vecs) == 2 and x.ty != y.ty:
        lw.fail(node, f"{x.ty} and {y.ty} in one operation",
                "vectors of one element type and lane count")
    if vecs and lanes is not None and vecs[0].ty.lanes != lanes:
        lw.fail(node, f"a {vecs[0].ty} with a mask of {lanes} lanes", "equal lane counts")
    if vecs:
        vty = vecs[0].ty
    else:  # simd.select(mask, a, b) of two scalars
        a, c, ty = common(lw.b, lw.value(x, node), lw.value(y, node), arith=False)
        x, y, vty = a, c, VecType(ty, lanes)
    out = [v if is_vector(v) else Val(broadcast(lw, scalar_for(lw, vty, v, node), vty),
                                      vty) for v in (x, y)]
    return out[0], out[1]


def assign_vector(lw, name: str, current, value, node) -> None:
    """``name = value`` where either side is a vector: the types must be equal."""
    if isinstance(current, Var) and (not isinstance(value, Val) or value.ty != current.ty):
        got = value.ty if isinstance(value, Val) else "a constant"
        lw.fail(node, f"'{name}' is {current.ty} (from line {current.line}) but this "
                f"assigns {got}", "a vector of that type (`simd.splat(x, n)` for a "
                "scalar)")
    if current is None or isinstance(current, Const):
        current = Var(lw.slot(value.ty.ir, name), value.ty, node.lineno)
        lw.frame.env[name] = current
    lw.b.store(value.ir, current.slot)


# -- memory ---------------------------------------------------------------------------
def v_load(lw, node) -> Val:
    buf, at, n = lw.args(node, 3)
    buffer_arg(lw, buf, node)
    lanes = vlanes(lw, n, node.args[2])
    if buf.ty.dtype not in COMPUTE or buf.ty.dtype == BOOL:
        lw.fail(node, f"a vector load from {buf.ty.dtype} buffer '{buf.name}'",
                "a buffer of f32, f64, i32 or i64 (or scalar loads)")
    vty = VecType(buf.ty.dtype, lanes)
    index = index_of(lw, at, node.args[1])
    check_flat(lw, buf, index, lanes, node)
    return Val(u.load_vec(lw.b, buf.ptr, index, vty.ir), vty)


def v_store(lw, node, stream: bool = False):
    buf, at, v = lw.args(node, 3)
    buffer_arg(lw, buf, node)
    lw.mark_written(buf)
    v = as_vector(lw, v, node.args[2])
    if v.ty.elem != buf.ty.dtype:
        lw.fail(node, f"storing a {v.ty} into {buf.ty.dtype} buffer '{buf.name}'",
                "a vector of the buffer's element type")
    index = index_of(lw, at, node.args[1])
    check_flat(lw, buf, index, v.ty.lanes, node)
    size = v.ty.elem.bits // 8
    align = min(64, (size * v.ty.lanes) & -(size * v.ty.lanes)) if stream else size
    ptr = u.gep(lw.b, buf.ptr, index, v.ty.elem.ir)
    if stream:  # a misaligned streaming store faults (vmovntps)
        stream_target(lw, buf, index, ptr, size, align, node)
    store = lw.b.store(v.ir, ptr, align=align)
    if stream:
        store.set_metadata("nontemporal", lw.b.module.add_metadata([u.const_i32(1)]))
    return Const(None)


def v_stream_store(lw, node):
    return v_store(lw, node, stream=True)


# -- lanes ----------------------------------------------------------------------------
def v_splat(lw, node) -> Val:
    x, n = lw.args(node, 2)
    val = lw.value(x, node.args[0])
    vty = VecType(val.ty, vlanes(lw, n, node.args[1]))
    return Val(broadcast(lw, val.ir, vty), vty)


def v_iota(lw, node) -> Val:
    ty, n = lw.args(node, 2)
    elem = ty.value if isinstance(ty, Const) else None
    if elem not in COMPUTE or elem == BOOL:
        lw.fail(node.args[0], "simd.iota needs an element type first",
                "`simd.iota(i32, 16)` (i32, i64, f32 or f64)")
    vty = VecType(elem, vlanes(lw, n, node.args[1]))
    lanes = [ir.Constant(elem.ir, float(k) if elem.is_float else k) for k in range(vty.lanes)]
    return Val(ir.Constant(vty.ir, lanes), vty)


def v_select(lw, node) -> Val:
    m, a, c = lw.args(node, 3)
    if not is_vector(m):  # one bool for every lane: a whole-vector choice
        if not (is_vector(a) or is_vector(c)):
            lw.fail(node, "simd.select of a bool and two scalars", "select(c, a, b)")
        flag = lw.value(m, node.args[0])
        if flag.ty != BOOL:
            lw.fail(node.args[0], f"simd.select needs a mask or a bool first, got "
                    f"{flag.ty}", "a comparison")
        a, c = operands(lw, a, c, node)
        return Val(lw.b.select(flag.ir, a.ir, c.ir), a.ty)
    if m.ty.elem != BOOL:
        lw.fail(node.args[0], "simd.select needs a mask first", "a vector comparison")
    a, c = operands(lw, a, c, node, lanes=m.ty.lanes)
    return Val(lw.b.select(m.ir, a.ir, c.ir), a.ty)


# -- arithmetic -----------------------------------------------------------------------
def vec_arith(lw, op: str, x, y, node) -> Val:
    x, y = operands(lw, x, y, node)
    elem, b = x.ty.elem, lw.b
    if elem.is_float and op in ("+", "-", "*", "/"):
        return Val(_float_op(b, op, x.ir, y.ir, lw.flags), x.ty)
    # Floats have no bitwise operators (LLVM's `and` takes ints; Python refuses them too).
    ops = {} if elem.is_float else {"&": b.and_, "|": b.or_, "^": b.xor}
    if elem.is_int:
        ops.update({"+": b.add, "-": b.sub, "*": b.mul})
    if op not in ops:
        lw.fail(node, f"operator {op} on {x.ty}",
                "+ - * / on float vectors, + - * & | ^ on int vectors, & | ^ on masks")
    return Val(ops[op](x.ir, y.ir), x.ty)


def vec_unary(lw, kind, x: Val, node) -> Val:
    if kind is ast.UAdd:
        return x
    if kind is ast.USub and x.ty.elem != BOOL:
        zero = ir.Constant(x.ty.ir, [ir.Constant(x.ty.elem.ir, 0)] * x.ty.lanes)
        return Val(lw.b.fneg(x.ir, flags=lw.flags) if x.ty.elem.is_float
                   else lw.b.sub(zero, x.ir), x.ty)
    if kind is ast.Invert and not x.ty.elem.is_float:
        ones = ir.Constant(x.ty.ir, [ir.Constant(x.ty.elem.ir, -1)] * x.ty.lanes)
        return Val(lw.b.xor(x.ir, ones), x.ty)
    lw.fail(node, f"`{ast.unparse(node)}` on a {x.ty}",
            "`~mask` for a mask's complement, `-v` for a negation")


def vec_abs(lw, x: Val, node) -> Val:
    """``abs(v)`` lane-wise (ints wrap: abs of the most negative lane is itself)."""
    if x.ty.elem == BOOL:
        lw.fail(node, "abs() of a mask")
    if x.ty.elem.is_float:
        return Val(u.intrinsic(lw.b, "llvm.fabs", x.ir), x.ty)
    neg = vec_unary(lw, ast.USub, x, node)
    below = lw.b.icmp_signed("<", neg.ir, u.splat(0, x.ty.ir))
    return Val(lw.b.select(below, x.ir, neg.ir), x.ty)


def vec_cast(lw, ty, x: Val) -> Val:
    """``f32(v)``, ``i32(v)``...: every lane cast as the scalar cast does (float -> int
    truncates and saturates, NaN -> 0; -> boolean is ``!= 0``)."""
    src, out, b, v = x.ty.elem, VecType(ty, x.ty.lanes), lw.b, x.ir
    if src == ty:
        return x
    if ty == BOOL:
        zero = u.splat(0.0 if src.is_float else 0, x.ty.ir)
        return Val(b.fcmp_unordered("!=", v, zero) if src.is_float
                   else b.icmp_unsigned("!=", v, zero), out)
    if src.is_float and ty.is_float:
        return Val(b.fpext(v, out.ir) if ty.bits > src.bits else b.fptrunc(v, out.ir), out)
    if ty.is_float:
        return Val(b.uitofp(v, out.ir) if src == BOOL else b.sitofp(v, out.ir), out)
    if not src.is_float:
        wider = ty.bits > src.bits
        return Val((b.zext if src == BOOL else b.sext)(v, out.ir) if wider
                   else b.trunc(v, out.ir), out)
    hi, lo = u.splat(float(2 ** (ty.bits - 1)), x.ty.ir), u.splat(-float(2 ** (ty.bits - 1)),
                                                                  x.ty.ir)
    inside = b.and_(b.fcmp_ordered(">=", v, lo), b.fcmp_ordered("<", v, hi))
    r = b.fptosi(b.select(inside, v, u.splat(0.0, x.ty.ir)), out.ir)
    r = b.select(b.fcmp_ordered(">=", v, hi), u.splat(2 ** (ty.bits - 1) - 1, out.ir), r)
    return Val(b.select(b.fcmp_ordered("<", v, lo), u.splat(-2 ** (ty.bits - 1), out.ir), r),
               out)


def vec_compare(lw, op: str, x, y, node) -> Val:
    x, y = operands(lw, x, y, node)
    return Val(vcmp(lw, op, x, y), VecType(BOOL, x.ty.lanes))


def vcmp(lw, op: str, x: Val, y: Val) -> ir.Value:
    if x.ty.elem.is_float:
        return (lw.b.fcmp_unordered("!=", x.ir, y.ir) if op == "!="
                else lw.b.fcmp_ordered(op, x.ir, y.ir))
    if x.ty.elem == BOOL:
        return lw.b.icmp_unsigned(op, x.ir, y.ir)
    return lw.b.icmp_signed(op, x.ir, y.ir)


def v_min(lw, node) -> Val:
    return vminmax(lw, node, "<")


def v_max(lw, node) -> Val:
    return vminmax(lw, node, ">")


def vminmax(lw, node, op: str) -> Val:
    a, c = lw.args(node, 2)
    if not (is_vector(a) or is_vector(c)):
        lw.fail(node, f"`{ast.unparse(node.func)}` of two scalars", "min(a, b) / max(a, b)")
    a, c = operands(lw, a, c, node)
    if a.ty.elem == BOOL:
        lw.fail(node, "min/max of masks", "`a & b` / `a | b`")
    return Val(lw.b.select(vcmp(lw, op, c, a), c.ir, a.ir), a.ty)


# -- reductions -----------------------------------------------------------------------
def v_reduce_add(lw, node) -> Val:
    return reduce(lw, node, "add")


def v_reduce_max(lw, node) -> Val:
    return reduce(lw, node, "max")


def v_reduce_min(lw, node) -> Val:
    return reduce(lw, node, "min")


def reduce(lw, node, op: str) -> Val:
    """Halves combined until one lane is left (the order `simd` documents)."""
    (v,) = lw.args(node, 1)
    v = as_vector(lw, v, node.args[0])
    elem = v.ty.elem
    if elem == BOOL:
        lw.fail(node, "a reduction of a mask", "simd.any(mask) / simd.all(mask)")
    pad = ir.Constant(elem.ir, simd.identity(op, elem.dtype))
    cur, n = v.ir, v.ty.lanes
    while n > 1:
        h = (n + 1) // 2
        pads = ir.Constant(u.vec(elem.ir, n), [pad] * n)
        lo = lw.b.shuffle_vector(cur, pads, ir.Constant(u.vec(u.I32, h), list(range(h))))
        hi = lw.b.shuffle_vector(cur, pads, ir.Constant(
            u.vec(u.I32, h), list(range(h, n)) + [n] * (2 * h - n)))
        cur, n = combine(lw, op, elem, lo, hi), h
    return Val(lw.b.extract_element(cur, u.const_i32(0)), elem)


def combine(lw, op: str, elem, lo: ir.Value, hi: ir.Value) -> ir.Value:
    if op == "add":
        return lw.b.fadd(lo, hi) if elem.is_float else lw.b.add(lo, hi)
    better = (lw.b.fcmp_ordered if elem.is_float else lw.b.icmp_signed)(
        ">" if op == "max" else "<", hi, lo)
    return lw.b.select(better, hi, lo)


def v_any(lw, node) -> Val:
    return mask_reduce(lw, node, "or")


def v_all(lw, node) -> Val:
    return mask_reduce(lw, node, "and")


def mask_reduce(lw, node, kind: str) -> Val:
    (m,) = lw.args(node, 1)
    m = as_vector(lw, m, node.args[0])
    if m.ty.elem != BOOL:
        lw.fail(node, f"`{ast.unparse(node.func)}` of a {m.ty}", "a mask (a comparison)")
    name = f"llvm.vector.reduce.{kind}.v{m.ty.lanes}i1"
    fn = lw.b.module.globals.get(name) or ir.Function(
        lw.b.module, ir.FunctionType(u.I1, [m.ty.ir]), name=name)
    return Val(lw.b.call(fn, [m.ir]), BOOL)


__all__ = ["is_vector"]
