"""Lowering of `kmath` calls: the float functions (scalar, or lane-wise on a vector through
`vector_lower`; ``exp`` and ``sigmoid`` of f32 are the vectorisable polynomial) and the bit
counts ``ctz`` / ``popcount``, which read an int at its width (`int_word`, shared
with ``for bit in bits(word)``)."""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .. import irutil as u
from . import folding, kmath, kpoly, promotion
from .arith import convert
from .fold_lower import fold_call
from .slice_lower import is_slice
from .types import BOOL, F64, I32, I64, VecType
from .values import BufRef, Const, Val
from .vector_lower import is_vector
from .vector_lower import broadcast, scalar_for


def math(lw, fn, node: ast.Call):
    name, n = kmath.FUNCTIONS[fn]
    raw = lw.args(node, n)
    if any(isinstance(x, Val) and isinstance(x.ty, VecType) for x in raw):
        return vector_math(lw, name, raw, node)
    if all(isinstance(x, Const) for x in raw):
        return fold_call(lw, node, _fold_math, fn, *(x.value for x in raw))
    vals = [lw.value(x, a) for x, a in zip(raw, node.args)]
    ty = promotion.math_argument([v.ty for v in vals], [v.weak for v in vals])
    args = [convert(lw.b, v, ty).ir for v in vals]
    if name == "isnan":
        return Val(lw.b.fcmp_unordered("uno", args[0], args[0]), BOOL)
    return Val(emit(lw.b, name, args, lw.flags), ty)


def bit_count(lw, fn, node: ast.Call):
    """`kmath.ctz` / `kmath.popcount` of an int, at its width (`int_word`); the result is
    an i64 for an i64 word, else an i32."""
    if len(node.args) != 1 or node.keywords:
        lw.fail(node, f"kmath.{fn.__name__} takes one argument", "`kmath.ctz(x)`")
    word = int_word(lw, node.args[0], f"kmath.{fn.__name__}", "an integer argument")
    if isinstance(word, Const):
        return Const(fn(word.value))
    extra = [ir.Constant(u.I1, 0)] if fn is kmath.ctz else []  # ctz(0) = width, defined
    out = u.intrinsic(lw.b, kmath.INT_FUNCTIONS[fn], word, *extra)
    if word.type.width == 64:
        return Val(out, I64)
    return Val(out if word.type.width == 32 else lw.b.zext(out, u.I32), I32)


def int_word(lw, arg: ast.expr, what: str, instead: str):
    """An int whose bit pattern matters (`bits`, `ctz`, `popcount`), as an IR int of its
    width, or a `Const`. A buffer element read directly keeps its storage width (an i8
    element -1 is 0xFF: 8 bits, as the numpy scalar uncompiled); any other value has its
    kernel type, i32 or i64 (an i8 held in a variable is an i32)."""
    if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) \
            and not is_slice(arg):
        buf = lw.expr(arg.value)  # a name: evaluating it has no effects
        if isinstance(buf, BufRef) and buf.ty.dtype.is_int:
            return lw.b.load(lw.element(buf, arg), typ=buf.ty.dtype.ir)
    x = lw.expr(arg)
    if isinstance(x, Const) and type(x.value) is int:
        return x
    val = lw.value(x, arg, vector=True)
    if isinstance(val.ty, VecType) or val.ty.is_float or val.ty == BOOL:
        lw.fail(arg, f"{what} of a {val.ty}", instead)
    return val.ir


def vector_math(lw, name: str, raw: list, node) -> Val:
    """A `kmath` function lane-wise (one vector argument at least)."""
    vty = next(x.ty for x in raw if is_vector(x))
    if name == "isnan" or not vty.elem.is_float:
        lw.fail(node, f"`{ast.unparse(node.func)}` of a {vty}",
                "`v != v` for NaN lanes" if name == "isnan" else "a float vector")
    args = []
    for x, a in zip(raw, node.args):
        if is_vector(x) and x.ty != vty:
            lw.fail(a, f"{x.ty} and {vty} in one call", "vectors of one type")
        args.append(x.ir if is_vector(x) else broadcast(lw, scalar_for(lw, vty, x, a), vty))
    return Val(emit(lw.b, name, args, lw.flags), vty)


def emit(b: ir.IRBuilder, name: str, args: list, flags: tuple) -> ir.Value:
    """The IR of `kmath` function ``name`` (its `kmath.FUNCTIONS` lowering) on float scalars
    or vectors of one type: an LLVM intrinsic (``llvm.sin``: the back end calls the C
    library's ``sinf`` / ``sin`` lane by lane, or emits an instruction, ``llvm.sqrt``), the
    f32 polynomial exp, the f32 polynomials of `kpoly` (asin acos atan atan2), the inline
    f32 `hypot`, or a C library function (``libm.erf``)."""
    ty = args[0].type
    f32 = (ty.element if isinstance(ty, ir.VectorType) else ty) == u.F32
    if name in ("exp", "sigmoid") and f32:
        return (u.vexp if name == "exp" else u.sigmoid)(b, args[0])
    if name == "sigmoid":
        one = u.splat(1.0, args[0].type)
        e = u.intrinsic(b, "llvm.exp", b.fneg(args[0]))
        return b.fdiv(one, b.fadd(one, e))
    short = name.split(".", 1)[-1]
    if f32 and short in kpoly.FUNCTIONS:
        return kpoly.emit(b, short, args)  # asin ... tanh expm1: no call, vectorises
    if name == "hypot":
        return _hypot32(b, *args) if f32 else _libm_call(b, "hypot", args)
    if name.startswith("libm."):
        return _libm_call(b, name[5:], args)
    return u.intrinsic(b, "llvm.exp" if name == "exp" else name, *args, flags=flags)


def _hypot32(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """f32 ``hypot`` in f64: the squares are exact and their sum cannot overflow, so one
    rounding of the sum, the root's and the narrowing (<= 0.5 ulp + a double rounding); an
    infinite argument gives +inf, as C's (a NaN in the other too). No call: vectorises."""
    wide = u.F64 if not isinstance(x.type, ir.VectorType) else u.vec(u.F64, x.type.count)
    wx, wy = b.fpext(x, wide), b.fpext(y, wide)
    root = u.intrinsic(b, "llvm.sqrt", b.fadd(b.fmul(wx, wx), b.fmul(wy, wy)))
    out = b.fptrunc(root, x.type)
    inf = u.splat(float("inf"), x.type)
    infinite = b.or_(b.fcmp_ordered("==", u.intrinsic(b, "llvm.fabs", x), inf),
                     b.fcmp_ordered("==", u.intrinsic(b, "llvm.fabs", y), inf))
    return b.select(infinite, inf, out)


def _libm_call(b: ir.IRBuilder, name: str, args: list) -> ir.Value:
    """A call of the C library's ``name`` (``namef`` on f32), lane by lane on a vector (there
    is no LLVM intrinsic for it: ``expm1 log1p erf``, f64 ``hypot``)."""
    ty = args[0].type
    elem = ty.element if isinstance(ty, ir.VectorType) else ty
    symbol = name + ("f" if elem == u.F32 else "")
    fn = b.module.globals.get(symbol) or ir.Function(
        b.module, ir.FunctionType(elem, [elem] * len(args)), name=symbol)
    if not isinstance(ty, ir.VectorType):
        return b.call(fn, args)
    out = ir.Constant(ty, ir.Undefined)
    for k in range(ty.count):
        lane = [b.extract_element(a, u.const_i32(k)) for a in args]
        out = b.insert_element(out, b.call(fn, lane), u.const_i32(k))
    return out


def _fold_math(fn, *args):
    """A `kmath` function of constants, as the compiled f64 code computes it: ints are the
    f64 of their i64, the libm functions are the C library's (`folding.libm`), ``fma``
    rounds once (the numpy twin rounds the product first)."""
    if not all(folding.is_number(a) for a in args):
        raise TypeError(f"kmath.{fn.__name__} of a non-number")
    args = [folding.cast(F64, a) for a in args]
    if fn is kmath.fma:
        return folding.fma(*args)
    if fn is kmath.sigmoid:
        return 1.0 / (1.0 + folding.libm("exp", -args[0]))
    if fn in (kmath.exp, kmath.log, kmath.atan2, kmath.sin, kmath.cos):
        return folding.libm(fn.__name__, *args)
    with np.errstate(all="ignore"):  # exact ones (sqrt, floor, ceil, trunc, round; isnan),
        out = fn(*args)  # the rest the C library's f64 function (`kmath._libm`)
    return out if fn is kmath.isnan else float(out)
