"""f32 ``asin acos atan atan2 sinh cosh tanh expm1 log log1p erf`` as polynomials, written
once for the compiled code and the uncompiled twin.

Each function is a sequence of operations (add, multiply, divide, sqrt, compare, select) on
an `Ops`, carried out in f64 and rounded to f32 once at the end (in f32 every step would
round: 2.4-3.0 ulps; in f64 the polynomial's own error is what is left: <= 0.83 ulp):
`IROps` emits them as LLVM IR (scalars or vectors, no fast-math flags, so no contraction:
every operation rounds once), `NumpyOps` runs them on numpy float64 arrays. Both round every
step the same way, so compiled and uncompiled give the same bits, and the code has no call:
a loop using them vectorises, and a C library export needs no libm for them.

The polynomials are Cephes' (S. L. Moshier: ``atanf`` and ``asinf``; the double ``exp``
rational, which gives ``expm1`` near 0 and, through it, ``tanh`` and ``sinh``; ``log``;
``ndtr``'s ``erf`` / ``erfc``), reduced branch-free: every range is computed and the right
one selected. Accuracy against numpy's float64 (AMD
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

    def rint(self, x):
        return u.intrinsic(self.b, "llvm.rint", x)

    def ldexp(self, x, n):
        """``x * 2**n``, ``n`` an integral double in [-1022, 1023], from the exponent bits."""
        ity = u.vec(u.I64, self.ty.count) if isinstance(self.ty, ir.VectorType) else u.I64
        bits = self.b.shl(self.b.add(self.b.fptosi(n, ity), u.splat(1023, ity)),
                          u.splat(52, ity))
        return self.b.fmul(x, self.b.bitcast(bits, self.ty))

    def frexp(self, x):
        """(m, e): ``x = m * 2**e``, m in [0.5, 1), e an integral double; for a positive
        normal ``x`` (anything else gives numbers the caller replaces)."""
        ity = u.vec(u.I64, self.ty.count) if isinstance(self.ty, ir.VectorType) else u.I64
        bits = self.b.bitcast(x, ity)
        exponent = self.b.sub(self.b.lshr(bits, u.splat(52, ity)), u.splat(1022, ity))
        mantissa = self.b.or_(self.b.and_(bits, u.splat((1 << 52) - 1, ity)),
                              u.splat(1022 << 52, ity))
        return self.b.bitcast(mantissa, self.ty), self.b.sitofp(exponent, self.ty)

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
    nan, rint = staticmethod(np.isnan), staticmethod(np.rint)

    @staticmethod
    def ldexp(x, n):
        return np.ldexp(x, np.asarray(n).astype(np.int64))

    @staticmethod
    def frexp(x):
        m, e = np.frexp(x)
        return m, e.astype(np.float64)


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


#: Cephes' exp (and expm1) rational approximation, |r| <= ln(2) / 2: 3e-16 relative
_EXP_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
_EXP_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1,
          2.00000000000000000009e0)
_LN2_HI, _LN2_LO = 6.93145751953125e-1, 1.42860682030941723212e-6


def _clamp(o, x, limit: float):
    """``x`` limited to [-limit, limit] (a NaN stays NaN): what is past it over- or
    underflows f32 either way, and keeps the exponent bits of `_exp` in range."""
    x = o.select(o.gt(x, o.c(limit)), o.c(limit), x)
    return o.select(o.gt(o.c(-limit), x), o.c(-limit), x)


def _ratio(o, r):
    """``expm1(r) / 2`` for |r| <= 0.5 (Cephes)."""
    rr = o.mul(r, r)
    p = o.mul(r, _horner(o, _EXP_P, rr))
    return o.div(p, o.sub(_horner(o, _EXP_Q, rr), p))


def _exp(o, x):
    """exp(x) for |x| <= 100 (NaN: NaN): 2**n * exp(r), r = x - n ln 2."""
    n = o.rint(o.mul(x, o.c(1.4426950408889634)))
    n = o.select(o.nan(n), o.c(0.0), n)  # (a NaN exponent would be poison in the bits)
    r = o.sub(o.sub(x, o.mul(n, o.c(_LN2_HI))), o.mul(n, o.c(_LN2_LO)))
    half = _ratio(o, r)
    return o.ldexp(o.add(o.c(1.0), o.add(half, half)), n)


def _expm1(o, x):
    """expm1(x) for |x| <= 100: the rational near 0 (no cancellation), else exp(x) - 1."""
    half = _ratio(o, x)
    near = o.gt(o.c(0.5), o.abs(x))
    return o.select(near, o.add(half, half), o.sub(_exp(o, x), o.c(1.0)))


def expm1(o, x):
    return _expm1(o, _clamp(o, x, 100.0))


def tanh(o, x):
    """sign(x) E / (E + 2), E = expm1(2 |x|) (|x| past 20 is 1)."""
    e = _expm1(o, o.add(*(2 * [_clamp(o, o.abs(x), 20.0)])))
    return o.copysign(o.div(e, o.add(e, o.c(2.0))), x)


def sinh(o, x):
    """sign(x) (E + E / (E + 1)) / 2, E = expm1(|x|)."""
    e = _expm1(o, _clamp(o, o.abs(x), 100.0))
    return o.copysign(o.mul(o.c(0.5), o.add(e, o.div(e, o.add(e, o.c(1.0))))), x)


def cosh(o, x):
    """(e + 1 / e) / 2, e = exp(|x|)."""
    e = _exp(o, _clamp(o, o.abs(x), 100.0))
    return o.mul(o.c(0.5), o.add(e, o.div(o.c(1.0), e)))


#: Cephes' log: log(1 + x) = x - x**2 / 2 + x**3 P(x) / Q(x), x in [sqrt(1/2) - 1, sqrt(2) - 1]
_LOG_P = (1.01875663804580931796e-4, 4.97494994976747001425e-1, 4.70579119878881725854e0,
          1.44989225341610930846e1, 1.79368678507819816313e1, 7.70838733755885391666e0)
_LOG_Q = (1.0, 1.12873587189167450590e1, 4.52279145837532221105e1, 8.29875266912776603211e1,
          7.11544750618563894466e1, 2.31251620126765340583e1)


def _log(o, v):
    """log(v) for a positive normal ``v``: frexp, then the rational of the mantissa."""
    m, e = o.frexp(v)
    low = o.gt(o.c(0.7071067811865476), m)
    e = o.select(low, o.sub(e, o.c(1.0)), e)
    x = o.select(low, o.sub(o.add(m, m), o.c(1.0)), o.sub(m, o.c(1.0)))
    z = o.mul(x, x)
    y = o.mul(x, o.div(o.mul(z, _horner(o, _LOG_P, x)), _horner(o, _LOG_Q, x)))
    y = o.sub(o.sub(y, o.mul(e, o.c(2.121944400546905827679e-4))), o.mul(o.c(0.5), z))
    return o.add(o.add(x, y), o.mul(e, o.c(0.693359375)))


def log(o, x):
    """`_log` (an f32 ``x`` > 0 is normal in f64, subnormals too); 0: -inf, below: NaN."""
    r = o.select(o.eq(x, o.c(math.inf)), x, _log(o, x))
    r = o.select(o.eq(x, o.c(0.0)), o.c(-math.inf), r)
    r = o.select(o.gt(o.c(0.0), x), o.c(math.nan), r)
    return o.select(o.nan(x), x, r)


def log1p(o, x):
    """log(v) x / (v - 1), v = 1 + x (the factor undoes the rounding of v; x where v is 1);
    -1: -inf, below: NaN, inf: inf."""
    v = o.add(o.c(1.0), x)
    d = o.sub(v, o.c(1.0))
    r = o.select(o.eq(d, o.c(0.0)), x, o.mul(_log(o, v), o.div(x, d)))
    r = o.select(o.eq(x, o.c(math.inf)), x, r)
    r = o.select(o.eq(x, o.c(-1.0)), o.c(-math.inf), r)
    return o.select(o.gt(o.c(-1.0), x), o.c(math.nan), r)


_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)


def erf(o, x):
    """|x| < 1: x T(x**2) / U(x**2); else 1 - erfc(|x|), erfc = exp(-x**2) P(x) / Q(x)
    (Cephes ``ndtr``; |x| past 8 is 1), with x's sign."""
    a = o.abs(x)
    z = o.mul(a, a)
    small = o.div(o.mul(a, _horner(o, _ERF_T, z)), _horner(o, _ERF_U, z))
    b = _clamp(o, a, 8.0)
    erfc = o.div(o.mul(_exp(o, o.sub(o.c(0.0), o.mul(b, b))), _horner(o, _ERFC_P, b)),
                 _horner(o, _ERFC_Q, b))
    return o.copysign(o.select(o.gt(o.c(1.0), a), small, o.sub(o.c(1.0), erfc)), x)


FUNCTIONS = {"asin": asin, "acos": acos, "atan": atan, "atan2": atan2, "expm1": expm1,
             "tanh": tanh, "sinh": sinh, "cosh": cosh, "log": log, "log1p": log1p, "erf": erf}


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
