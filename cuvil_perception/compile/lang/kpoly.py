"""f32 ``asin acos atan atan2`` as polynomials, written once for the compiled code and the
uncompiled twin.

Each function is a sequence of operations (add, multiply, divide, sqrt, compare, select) on
an `Ops`, carried out in f64 and rounded to f32 once at the end (in f32 every step would
round: 2.4-3.0 ulps; in f64 the polynomial's own error is what is left: <= 0.83 ulp):
`IROps` emits them as LLVM IR (scalars or vectors, no fast-math flags, so no contraction:
every operation rounds once), `NumpyOps` runs them on numpy float64 arrays. Both round every
step the same way, so compiled and uncompiled give the same bits, and the code has no call:
a loop using them vectorises, and a C library export needs no libm for them.

The polynomials are Cephes' (``atanf``, ``asinf``; S. L. Moshier), reduced branch-free:
every range is computed and the right one selected. Accuracy against numpy's float64 (AMD
EPYC Zen 4, `benchmarks/kmath_accuracy.py`) is in docs/kernel-language.md. f64 keeps the C
library's functions.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from .. import irutil as u

_ATAN = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_ASIN = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2,
         1.6666752422e-1)
_TAN3PI8, _TANPI8 = 2.414213562373095, 0.4142135623730950


class IROps:
    """f64 operations emitted as IR on ``like``'s type (a double or a vector of doubles)."""

    def __init__(self, b: ir.IRBuilder, like: ir.Value):
        self.b, self.ty = b, like.type

    def c(self, v: float):
        return u.splat(float(v), self.ty)

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def sqrt(self, x):
        return u.intrinsic(self.b, "llvm.sqrt", x)

    def abs(self, x):
        return u.intrinsic(self.b, "llvm.fabs", x)

    def copysign(self, x, sign):
        return u.intrinsic(self.b, "llvm.copysign", x, sign)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def both(self, p, q):
        return self.b.and_(p, q)

    def nan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def select(self, cond, x, y):
        return self.b.select(cond, x, y)


class NumpyOps:
    """The same operations on numpy float64 arrays (the uncompiled twin)."""

    @staticmethod
    def c(v: float):
        return np.float64(v)

    add, sub, mul = staticmethod(np.add), staticmethod(np.subtract), staticmethod(np.multiply)
    div, sqrt, abs = staticmethod(np.divide), staticmethod(np.sqrt), staticmethod(np.abs)
    copysign, gt = staticmethod(np.copysign), staticmethod(np.greater)
    eq, both, select = staticmethod(np.equal), staticmethod(np.logical_and), staticmethod(np.where)
    nan = staticmethod(np.isnan)


def _horner(o, coefs: tuple, z):
    p = o.c(coefs[0])
    for k in coefs[1:]:
        p = o.add(o.mul(p, z), o.c(k))
    return p


def _atan_abs(o, a):
    """atan(a) for a >= 0 (or NaN): Cephes' three ranges, selected."""
    big, mid = o.gt(a, o.c(_TAN3PI8)), o.gt(a, o.c(_TANPI8))
    t = o.select(big, o.div(o.c(-1.0), a), o.select(
        mid, o.div(o.sub(a, o.c(1.0)), o.add(a, o.c(1.0))), a))
    base = o.select(big, o.c(math.pi / 2), o.select(mid, o.c(math.pi / 4), o.c(0.0)))
    z = o.mul(t, t)
    return o.add(base, o.add(o.mul(o.mul(_horner(o, _ATAN, z), z), t), t))


def atan(o, x):
    return o.copysign(_atan_abs(o, o.abs(x)), x)


def _asin_small(o, s, z):
    """asin(s) for |s| <= 0.5, z = s * s."""
    return o.add(o.mul(o.mul(_horner(o, _ASIN, z), z), s), s)


def asin(o, x):
    """|x| > 0.5: pi/2 - 2 asin(sqrt((1 - |x|) / 2)); |x| > 1 is NaN (a negative sqrt)."""
    a = o.abs(x)
    hi = o.gt(a, o.c(0.5))
    z = o.select(hi, o.mul(o.c(0.5), o.sub(o.c(1.0), a)), o.mul(a, a))
    s = o.select(hi, o.sqrt(z), a)
    r = _asin_small(o, s, z)
    return o.copysign(o.select(hi, o.sub(o.c(math.pi / 2), o.add(r, r)), r), x)


def acos(o, x):
    """|x| > 0.5: 2 asin(sqrt((1 - |x|) / 2)), from pi when x < 0; else pi/2 - asin(x)."""
    a = o.abs(x)
    hi = o.gt(a, o.c(0.5))
    z = o.select(hi, o.mul(o.c(0.5), o.sub(o.c(1.0), a)), o.mul(x, x))
    s = o.select(hi, o.sqrt(z), x)
    r = _asin_small(o, s, z)
    twice = o.add(r, r)
    negative = o.gt(o.c(0.0), x)
    wide = o.select(negative, o.sub(o.c(math.pi), twice), twice)
    return o.select(hi, wide, o.sub(o.c(math.pi / 2), r))


def atan2(o, y, x):
    """C's atan2: the angle of (x, y) in [-pi, pi], from atan of the smaller magnitude over
    the larger; (+-0, +-0) and (+-inf, +-inf) as C gives them, NaN in either: NaN."""
    a, b = o.abs(y), o.abs(x)
    steep = o.gt(a, b)
    num, den = o.select(steep, b, a), o.select(steep, a, b)
    ratio = o.div(num, den)
    infinite = o.both(o.eq(a, o.c(math.inf)), o.eq(b, o.c(math.inf)))
    ratio = o.select(o.eq(den, o.c(0.0)), o.c(0.0), o.select(infinite, o.c(1.0), ratio))
    r = _atan_abs(o, ratio)
    r = o.select(steep, o.sub(o.c(math.pi / 2), r), r)
    r = o.select(o.gt(o.c(0.0), o.copysign(o.c(1.0), x)), o.sub(o.c(math.pi), r), r)
    r = o.select(o.nan(o.add(a, b)), o.add(a, b), r)  # NaN in either: NaN ((NaN, 0) too)
    return o.copysign(r, y)


FUNCTIONS = {"asin": asin, "acos": acos, "atan": atan, "atan2": atan2}


def emit(b: ir.IRBuilder, name: str, args: list) -> ir.Value:
    """The IR of f32 ``name`` on ``args`` (scalars or vectors of f32): widened to f64,
    computed, rounded to f32 once."""
    ty = args[0].type
    wide = u.vec(u.F64, ty.count) if isinstance(ty, ir.VectorType) else u.F64
    args = [b.fpext(a, wide) for a in args]
    return b.fptrunc(FUNCTIONS[name](IROps(b, args[0]), *args), ty)


def evaluate(name: str, *args):
    """f32 ``name`` uncompiled: numpy float32 scalars or arrays in, the same out (computed
    in float64 as compiled, rounded once)."""
    arrays = [np.asarray(a, np.float32).astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        out = np.asarray(FUNCTIONS[name](NumpyOps, *arrays)).astype(np.float32)
    vector = next((a for a in args if isinstance(a, np.ndarray) and a.ndim), None)
    if vector is None:
        return np.float32(out)
    return np.asarray(out, np.float32).view(type(vector))


__all__ = ["emit", "evaluate", "FUNCTIONS"]
