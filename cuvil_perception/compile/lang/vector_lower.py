"""Lowering of vector values (``Vec[T, n]``): the `simd` value operations, operators and
comparisons on vectors, lane access ``v[k]`` and `kmath` functions lane-wise. What each one
means is in `simd`; this module only renders it (one LLVM vector instruction each, except the
reductions, which are the documented tree of shuffles)."""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from . import math_lower, simd
from .arith import _float_op, common, convert
from .scope import Var
from .types import BOOL, COMPUTE, Vec, VecType, vec_type
from .values import Const, Val


def is_vector(x) -> bool:
    return isinstance(x, Val) and isinstance(x.ty, VecType)


class VectorMixin:
    """Vector values for `lower.Lowerer`."""

    def vector_call(self, fn, node: ast.Call):
        return getattr(self, f"v_{simd.VECTOR_OPERATIONS[fn]}")(node)

    # -- checks and conversions -----------------------------------------------------------
    def vector(self, x, node) -> Val:
        if not is_vector(x):
            self.fail(node, f"`{ast.unparse(node)}` is not a vector",
                      "a vector (`simd.load(buf, at, n)`, `simd.splat(x, n)`)")
        return x

    def vlanes(self, n, node) -> int:
        if not (isinstance(n, Const) and isinstance(n.value, int)) or isinstance(n.value, bool):
            self.fail(node, "a lane count must be a compile-time int")
        try:
            return vec_type(BOOL, n.value).lanes
        except TypeError as exc:
            self.fail(node, str(exc))

    def local_type(self, node: ast.expr):
        """The type of an annotated local: a scalar, or ``Vec[T, n]``."""
        if not isinstance(node, ast.Subscript):
            return self.scalar_annotation(node)
        base = self.resolve(node.value).value
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        values = [self.expr(i) for i in items]
        if base is not Vec or not all(isinstance(v, Const) for v in values):
            self.fail(node, f"`{ast.unparse(node)}` is not a local type",
                      "a scalar type or `Vec[f32, 16]` (compile-time lane count)")
        try:
            return vec_type(*(v.value for v in values))
        except TypeError as exc:
            self.fail(node, str(exc))

    def scalar_for(self, vty: VecType, x, node) -> ir.Value:
        """A scalar operand of a vector operation, as the vector's element type: a literal
        adapts, a run-time value must already have that type."""
        val = self.value(x, node, want=vty.elem)
        if val.ty != vty.elem:
            lossy = val.ty.is_float and not vty.elem.is_float
            if not val.weak or lossy:
                self.fail(node, f"a {val.ty} scalar with a {vty}",
                          f"a cast of the scalar to {vty.elem}, `{vty.elem}(...)`")
            val = convert(self.b, val, vty.elem)
        return val.ir

    def broadcast(self, scalar: ir.Value, vty: VecType) -> ir.Value:
        if isinstance(scalar, ir.Constant):
            return ir.Constant(vty.ir, [scalar] * vty.lanes)
        undef = ir.Constant(vty.ir, ir.Undefined)
        one = self.b.insert_element(undef, scalar, u.const_i32(0))
        return self.b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, vty.lanes),
                                                             [0] * vty.lanes))

    def operands(self, x, y, node, lanes: int | None = None) -> tuple[Val, Val]:
        """Two operands as vectors of one type: a scalar side is broadcast."""
        vecs = [v for v in (x, y) if is_vector(v)]
        if len(vecs) == 2 and x.ty != y.ty:
            self.fail(node, f"{x.ty} and {y.ty} in one operation",
                      "vectors of one element type and lane count")
        if vecs and lanes is not None and vecs[0].ty.lanes != lanes:
            self.fail(node, f"a {vecs[0].ty} with a mask of {lanes} lanes", "equal lane counts")
        if vecs:
            vty = vecs[0].ty
        else:  # simd.select(mask, a, b) of two scalars
            a, c, ty = common(self.b, self.value(x, node), self.value(y, node), arith=False)
            x, y, vty = a, c, VecType(ty, lanes)
        out = [v if is_vector(v) else Val(self.broadcast(self.scalar_for(vty, v, node), vty),
                                           vty) for v in (x, y)]
        return out[0], out[1]

    def assign_vector(self, name: str, current, value, node) -> None:
        """``name = value`` where either side is a vector: the types must be equal."""
        if isinstance(current, Var) and (not isinstance(value, Val) or value.ty != current.ty):
            got = value.ty if isinstance(value, Val) else "a constant"
            self.fail(node, f"'{name}' is {current.ty} (from line {current.line}) but this "
                      f"assigns {got}", "a vector of that type (`simd.splat(x, n)` for a "
                      "scalar)")
        if current is None or isinstance(current, Const):
            current = Var(self.slot(value.ty.ir, name), value.ty, node.lineno)
            self.frame.env[name] = current
        self.b.store(value.ir, current.slot)

    # -- memory ---------------------------------------------------------------------------
    def v_load(self, node) -> Val:
        buf, at, n = self.args(node, 3)
        self.buffer_arg(buf, node)
        lanes = self.vlanes(n, node.args[2])
        if buf.ty.dtype not in COMPUTE or buf.ty.dtype == BOOL:
            self.fail(node, f"a vector load from {buf.ty.dtype} buffer '{buf.name}'",
                      "a buffer of f32, f64, i32 or i64 (or scalar loads)")
        vty = VecType(buf.ty.dtype, lanes)
        index = self.index_of(at, node.args[1])
        self.check_flat(buf, index, lanes, node)
        return Val(u.load_vec(self.b, buf.ptr, index, vty.ir), vty)

    def v_store(self, node, stream: bool = False):
        buf, at, v = self.args(node, 3)
        self.buffer_arg(buf, node)
        self.mark_written(buf)
        v = self.vector(v, node.args[2])
        if v.ty.elem != buf.ty.dtype:
            self.fail(node, f"storing a {v.ty} into {buf.ty.dtype} buffer '{buf.name}'",
                      "a vector of the buffer's element type")
        index = self.index_of(at, node.args[1])
        self.check_flat(buf, index, v.ty.lanes, node)
        size = v.ty.elem.bits // 8
        align = min(64, (size * v.ty.lanes) & -(size * v.ty.lanes)) if stream else size
        ptr = u.gep(self.b, buf.ptr, index, v.ty.elem.ir)
        if stream:  # a misaligned streaming store faults (vmovntps)
            self.stream_target(buf, index, ptr, size, align, node)
        store = self.b.store(v.ir, ptr, align=align)
        if stream:
            store.set_metadata("nontemporal", self.b.module.add_metadata([u.const_i32(1)]))
        return Const(None)

    def v_stream_store(self, node):
        return self.v_store(node, stream=True)

    # -- lanes ----------------------------------------------------------------------------
    def v_splat(self, node) -> Val:
        x, n = self.args(node, 2)
        val = self.value(x, node.args[0])
        vty = VecType(val.ty, self.vlanes(n, node.args[1]))
        return Val(self.broadcast(val.ir, vty), vty)

    def v_iota(self, node) -> Val:
        ty, n = self.args(node, 2)
        elem = ty.value if isinstance(ty, Const) else None
        if elem not in COMPUTE or elem == BOOL:
            self.fail(node.args[0], "simd.iota needs an element type first",
                      "`simd.iota(i32, 16)` (i32, i64, f32 or f64)")
        vty = VecType(elem, self.vlanes(n, node.args[1]))
        lanes = [ir.Constant(elem.ir, float(k) if elem.is_float else k) for k in range(vty.lanes)]
        return Val(ir.Constant(vty.ir, lanes), vty)

    def v_select(self, node) -> Val:
        m, a, c = self.args(node, 3)
        if not is_vector(m):  # one bool for every lane: a whole-vector choice
            if not (is_vector(a) or is_vector(c)):
                self.fail(node, "simd.select of a bool and two scalars", "select(c, a, b)")
            flag = self.value(m, node.args[0])
            if flag.ty != BOOL:
                self.fail(node.args[0], f"simd.select needs a mask or a bool first, got "
                          f"{flag.ty}", "a comparison")
            a, c = self.operands(a, c, node)
            return Val(self.b.select(flag.ir, a.ir, c.ir), a.ty)
        if m.ty.elem != BOOL:
            self.fail(node.args[0], "simd.select needs a mask first", "a vector comparison")
        a, c = self.operands(a, c, node, lanes=m.ty.lanes)
        return Val(self.b.select(m.ir, a.ir, c.ir), a.ty)

    # -- arithmetic -----------------------------------------------------------------------
    def vec_arith(self, op: str, x, y, node) -> Val:
        x, y = self.operands(x, y, node)
        elem, b = x.ty.elem, self.b
        if elem.is_float and op in ("+", "-", "*", "/"):
            return Val(_float_op(b, op, x.ir, y.ir, self.flags), x.ty)
        # Floats have no bitwise operators (LLVM's `and` takes ints; Python refuses them too).
        ops = {} if elem.is_float else {"&": b.and_, "|": b.or_, "^": b.xor}
        if elem.is_int:
            ops.update({"+": b.add, "-": b.sub, "*": b.mul})
        if op not in ops:
            self.fail(node, f"operator {op} on {x.ty}",
                      "+ - * / on float vectors, + - * & | ^ on int vectors, & | ^ on masks")
        return Val(ops[op](x.ir, y.ir), x.ty)

    def vec_unary(self, kind, x: Val, node) -> Val:
        if kind is ast.UAdd:
            return x
        if kind is ast.USub and x.ty.elem != BOOL:
            zero = ir.Constant(x.ty.ir, [ir.Constant(x.ty.elem.ir, 0)] * x.ty.lanes)
            return Val(self.b.fneg(x.ir, flags=self.flags) if x.ty.elem.is_float
                       else self.b.sub(zero, x.ir), x.ty)
        if kind is ast.Invert and not x.ty.elem.is_float:
            ones = ir.Constant(x.ty.ir, [ir.Constant(x.ty.elem.ir, -1)] * x.ty.lanes)
            return Val(self.b.xor(x.ir, ones), x.ty)
        self.fail(node, f"`{ast.unparse(node)}` on a {x.ty}",
                  "`~mask` for a mask's complement, `-v` for a negation")

    def vec_abs(self, x: Val, node) -> Val:
        """``abs(v)`` lane-wise (ints wrap: abs of the most negative lane is itself)."""
        if x.ty.elem == BOOL:
            self.fail(node, "abs() of a mask")
        if x.ty.elem.is_float:
            return Val(u.intrinsic(self.b, "llvm.fabs", x.ir), x.ty)
        neg = self.vec_unary(ast.USub, x, node)
        below = self.b.icmp_signed("<", neg.ir, u.splat(0, x.ty.ir))
        return Val(self.b.select(below, x.ir, neg.ir), x.ty)

    def vec_cast(self, ty, x: Val) -> Val:
        """``f32(v)``, ``i32(v)``...: every lane cast as the scalar cast does (float -> int
        truncates and saturates, NaN -> 0; -> boolean is ``!= 0``)."""
        src, out, b, v = x.ty.elem, VecType(ty, x.ty.lanes), self.b, x.ir
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

    def vec_compare(self, op: str, x, y, node) -> Val:
        x, y = self.operands(x, y, node)
        return Val(self.vcmp(op, x, y), VecType(BOOL, x.ty.lanes))

    def vcmp(self, op: str, x: Val, y: Val) -> ir.Value:
        if x.ty.elem.is_float:
            return (self.b.fcmp_unordered("!=", x.ir, y.ir) if op == "!="
                    else self.b.fcmp_ordered(op, x.ir, y.ir))
        if x.ty.elem == BOOL:
            return self.b.icmp_unsigned(op, x.ir, y.ir)
        return self.b.icmp_signed(op, x.ir, y.ir)

    def v_min(self, node) -> Val:
        return self.vminmax(node, "<")

    def v_max(self, node) -> Val:
        return self.vminmax(node, ">")

    def vminmax(self, node, op: str) -> Val:
        a, c = self.args(node, 2)
        if not (is_vector(a) or is_vector(c)):
            self.fail(node, f"`{ast.unparse(node.func)}` of two scalars", "min(a, b) / max(a, b)")
        a, c = self.operands(a, c, node)
        if a.ty.elem == BOOL:
            self.fail(node, "min/max of masks", "`a & b` / `a | b`")
        return Val(self.b.select(self.vcmp(op, c, a), c.ir, a.ir), a.ty)

    def vector_math(self, name: str, raw: list, node) -> Val:
        """A `kmath` function lane-wise (one vector argument at least)."""
        vty = next(x.ty for x in raw if is_vector(x))
        if name == "isnan" or not vty.elem.is_float:
            self.fail(node, f"`{ast.unparse(node.func)}` of a {vty}",
                      "`v != v` for NaN lanes" if name == "isnan" else "a float vector")
        args = []
        for x, a in zip(raw, node.args):
            if is_vector(x) and x.ty != vty:
                self.fail(a, f"{x.ty} and {vty} in one call", "vectors of one type")
            args.append(x.ir if is_vector(x) else self.broadcast(self.scalar_for(vty, x, a), vty))
        return Val(math_lower.emit(self.b, name, args, self.flags), vty)

    # -- reductions -----------------------------------------------------------------------
    def v_reduce_add(self, node) -> Val:
        return self.reduce(node, "add")

    def v_reduce_max(self, node) -> Val:
        return self.reduce(node, "max")

    def v_reduce_min(self, node) -> Val:
        return self.reduce(node, "min")

    def reduce(self, node, op: str) -> Val:
        """Halves combined until one lane is left (the order `simd` documents)."""
        (v,) = self.args(node, 1)
        v = self.vector(v, node.args[0])
        elem = v.ty.elem
        if elem == BOOL:
            self.fail(node, "a reduction of a mask", "simd.any(mask) / simd.all(mask)")
        pad = ir.Constant(elem.ir, simd.identity(op, elem.dtype))
        cur, n = v.ir, v.ty.lanes
        while n > 1:
            h = (n + 1) // 2
            pads = ir.Constant(u.vec(elem.ir, n), [pad] * n)
            lo = self.b.shuffle_vector(cur, pads, ir.Constant(u.vec(u.I32, h), list(range(h))))
            hi = self.b.shuffle_vector(cur, pads, ir.Constant(
                u.vec(u.I32, h), list(range(h, n)) + [n] * (2 * h - n)))
            cur, n = self.combine(op, elem, lo, hi), h
        return Val(self.b.extract_element(cur, u.const_i32(0)), elem)

    def combine(self, op: str, elem, lo: ir.Value, hi: ir.Value) -> ir.Value:
        if op == "add":
            return self.b.fadd(lo, hi) if elem.is_float else self.b.add(lo, hi)
        better = (self.b.fcmp_ordered if elem.is_float else self.b.icmp_signed)(
            ">" if op == "max" else "<", hi, lo)
        return self.b.select(better, hi, lo)

    def v_any(self, node) -> Val:
        return self.mask_reduce(node, "or")

    def v_all(self, node) -> Val:
        return self.mask_reduce(node, "and")

    def mask_reduce(self, node, kind: str) -> Val:
        (m,) = self.args(node, 1)
        m = self.vector(m, node.args[0])
        if m.ty.elem != BOOL:
            self.fail(node, f"`{ast.unparse(node.func)}` of a {m.ty}", "a mask (a comparison)")
        name = f"llvm.vector.reduce.{kind}.v{m.ty.lanes}i1"
        fn = self.b.module.globals.get(name) or ir.Function(
            self.b.module, ir.FunctionType(u.I1, [m.ty.ir]), name=name)
        return Val(self.b.call(fn, [m.ir]), BOOL)


__all__ = ["VectorMixin", "is_vector"]
