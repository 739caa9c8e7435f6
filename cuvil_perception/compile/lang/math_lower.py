"""Lowering of `kmath` calls: the float functions (scalar, or lane-wise on a vector through
`vector_lower`; ``exp`` and ``sigmoid`` of f32 are the vectorisable polynomial) and the bit
counts ``ctz`` / ``popcount``, which read an int at its width (`MathMixin.int_word`, shared
with ``for bit in bits(word)``)."""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .. import irutil as u
from . import folding, kmath
from .arith import convert
from .slice_lower import is_slice
from .types import BOOL, F64, I32, I64, VecType
from .values import BufRef, Const, Val


class MathMixin:
    """`kmath` calls for `lower.Lowerer`."""

    def math(self, fn, node: ast.Call):
        name, n = kmath.FUNCTIONS[fn]
        raw = self.args(node, n)
        if any(isinstance(x, Val) and isinstance(x.ty, VecType) for x in raw):
            return self.vector_math(name, raw, node)
        if all(isinstance(x, Const) for x in raw):
            return self.folded(node, _fold_math, fn, *(x.value for x in raw))
        vals = [self.value(x, a) for x, a in zip(raw, node.args)]
        ty = F64
        if all(v.ty.is_float for v in vals if not v.weak) and any(v.ty.is_float and not v.weak
                                                                    for v in vals):
            ty = max((v.ty for v in vals if not v.weak and v.ty.is_float),
                     key=lambda t: t.bits)
        args = [convert(self.b, v, ty).ir for v in vals]
        if name == "isnan":
            return Val(self.b.fcmp_unordered("uno", args[0], args[0]), BOOL)
        if name in ("exp", "sigmoid") and ty.bits == 32:
            out = (u.vexp if name == "exp" else u.sigmoid)(self.b, args[0])
        elif name == "sigmoid":
            one = ir.Constant(ty.ir, 1.0)
            e = u.intrinsic(self.b, "llvm.exp", self.b.fneg(args[0]))
            out = self.b.fdiv(one, self.b.fadd(one, e))
        else:
            out = u.intrinsic(self.b, "llvm.exp" if name == "exp" else name, *args,
                              flags=self.flags)
        return Val(out, ty)

    def bit_count(self, fn, node: ast.Call):
        """`kmath.ctz` / `kmath.popcount` of an int, at its width (`int_word`); the result is
        an i64 for an i64 word, else an i32."""
        if len(node.args) != 1 or node.keywords:
            self.fail(node, f"kmath.{fn.__name__} takes one argument", "`kmath.ctz(x)`")
        word = self.int_word(node.args[0], f"kmath.{fn.__name__}", "an integer argument")
        if isinstance(word, Const):
            return Const(fn(word.value))
        extra = [ir.Constant(u.I1, 0)] if fn is kmath.ctz else []  # ctz(0) = width, defined
        out = u.intrinsic(self.b, kmath.INT_FUNCTIONS[fn], word, *extra)
        if word.type.width == 64:
            return Val(out, I64)
        return Val(out if word.type.width == 32 else self.b.zext(out, u.I32), I32)

    def int_word(self, arg: ast.expr, what: str, instead: str):
        """An int whose bit pattern matters (`bits`, `ctz`, `popcount`), as an IR int of its
        width, or a `Const`. A buffer element read directly keeps its storage width (an i8
        element -1 is 0xFF: 8 bits, as the numpy scalar uncompiled); any other value has its
        kernel type, i32 or i64 (an i8 held in a variable is an i32)."""
        if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) \
                and not is_slice(arg):
            buf = self.expr(arg.value)  # a name: evaluating it has no effects
            if isinstance(buf, BufRef) and buf.ty.dtype.is_int:
                return self.b.load(self.element(buf, arg), typ=buf.ty.dtype.ir)
        x = self.expr(arg)
        if isinstance(x, Const) and type(x.value) is int:
            return x
        val = self.value(x, arg, vector=True)
        if isinstance(val.ty, VecType) or val.ty.is_float or val.ty == BOOL:
            self.fail(arg, f"{what} of a {val.ty}", instead)
        return val.ir


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
    with np.errstate(all="ignore"):  # exact ones: sqrt, floor, ceil, trunc; isnan
        out = fn(*args)
    return out if fn is kmath.isnan else float(out)


__all__ = ["MathMixin"]
