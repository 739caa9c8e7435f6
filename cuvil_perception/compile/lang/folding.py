"""Constant folding with the run-time semantics of `arith`.

A constant expression (literals, static parameters, module-level numbers) is computed when the
kernel is compiled, and must give what the machine code gives for the same values when one
operand is a run-time variable: a constant is an ``i64`` or ``f64`` (a ``bool`` in logic), so

- ints: ``+ - * & | ^ << ~``, negation and ``** n`` (n a constant int >= 0) are exact, as
  their result modulo 2**64 is the wrapped run-time one, so where the value lands checks it
  (`values.out_of_range`: ``2**64 - 1`` stored into a u64 buffer, ``2**63`` refused in an
  i64 one); any other operation (``// % >>``, comparisons, casts, ``min``, ``abs``, meeting a
  float) takes its operands as the i64 they are at run time, so ``(2**62 * 4) // 4`` is 0,
  not Python's 2**62. ``//`` and ``%`` floor; ``INT_MIN // -1`` is INT_MIN; ``a << n`` is 0
  and ``a >> n`` the sign for ``n`` >= 64 or < 0; ``a ** n`` with n < 0 is the f64 ``pow``;
- floats are IEEE doubles with numpy's results where Python raises: ``1.0 / 0.0`` is inf,
  ``0.0 / 0.0`` and ``1.0 % 0.0`` NaN, ``1e308 ** 2.0`` inf, ``(-8.0) ** (1 / 3)`` NaN; a
  float ``** n`` (n an int in [0, 64]) is the square-and-multiply chain the code unrolls;
- an int meeting a float is converted to f64 first (``2**53 + 1 == 2.0**53`` is True);
- casts saturate float -> int (NaN -> 0) and wrap int -> int; ``f32`` rounds once.

What has no run-time value is a `FoldError` (a compile error at the expression): an int ``//``
or ``%`` by a constant 0 (a release build gives ``x`` and 0 only so as not to trap), an int
outside [-2**63, 2**64) where it is taken as an i64 (exact ones past 2**128 at once: ``2 **
2**62`` would not finish), ``~`` of a float.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from .types import BOOL, F64, Scalar

_BITS = 64
_MIN, _SPAN = -(1 << 63), 1 << 64


class FoldError(Exception):
    """A constant expression without a run-time value: ``(message, what to write instead)``."""


def is_number(v) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def plain(v):
    """A numpy scalar as the Python number it stands for (Python numbers unchanged)."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def wrap(v: int) -> int:
    """An int as the i64 it is at run time (a u64 bit pattern up to 2**64 - 1 reads negative);
    outside [-2**63, 2**64) a `FoldError`."""
    v = int(v)
    if not _MIN <= v < _SPAN:
        raise FoldError(f"the constant {v} does not fit i64", "a value in [-2**63, 2**64 - 1]")
    return _signed(v)


def _signed(v: int, bits: int = _BITS) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _float(v) -> float:
    return float(wrap(v)) if not isinstance(v, float) else v


_RING = {"+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_,
         "|": operator.or_, "^": operator.xor}
_NP = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
       "//": np.floor_divide, "%": np.remainder}
_LARGEST = 1 << 128  # an exact int past this is refused (`2 ** 2**62` would not finish)


def exact(v: int) -> int:
    """An int result of ``+ - * & | ^ << ~``, negation or ``**`` (operations whose result
    modulo 2**64 is the wrapped run-time one), kept exact so that where it lands can check
    it (`values.out_of_range`: ``x[0] = 2**64 - 1`` into a u64 buffer); past 2**128 a
    `FoldError`."""
    if not -_LARGEST <= v <= _LARGEST:
        raise FoldError(f"the constant value ({v.bit_length()} bits) does not fit i64",
                        "a value in [-2**63, 2**64 - 1] (at run time it would wrap)")
    return v


def binary(op: str, a, b):
    """``a op b`` on two numbers, as the run-time code computes it."""
    a, b = plain(a), plain(b)
    if op in ("&", "|", "^") and isinstance(a, bool) and isinstance(b, bool):
        return bool(_RING[op](a, b))
    if op == "**" and type(b) is int and 0 <= b < 2**63 and not (isinstance(a, float)
                                                                  and b > 64):
        return _power(a, b)  # unrolled (an int base: any exponent; a float base: to 64)
    if op == "/" or isinstance(a, float) or isinstance(b, float):
        if op in ("&", "|", "^", "<<", ">>"):
            raise FoldError(f"operator {op} needs integer operands", "an explicit int cast")
        if op == "**":
            return libm("pow", _float(a), _float(b))
        with np.errstate(all="ignore"):
            return float(_NP[op](np.float64(_float(a)), np.float64(_float(b))))
    if op in _RING:
        return exact(_RING[op](int(a), int(b)))
    if op == "<<":
        n = wrap(b)
        return exact(int(a) << n) if 0 <= n < _BITS else 0
    a, b = wrap(a), wrap(b)
    if op in ("//", "%"):
        if b == 0:
            raise FoldError(f"integer {'division' if op == '//' else 'modulo'} by zero",
                            "a nonzero divisor (a run-time zero gives x // 0 == x, x % 0 == 0)")
        return _signed(a // b if op == "//" else a % b)
    if op == ">>":
        return a >> (b if 0 <= b < _BITS else _BITS - 1)
    return libm("pow", float(a), float(b))  # ** with a negative exponent: llvm.pow


def _power(base, n: int):
    """``base ** n`` as `arith.power` unrolls it: square-and-multiply, each step rounded (a
    float; n <= 64), or exactly (an int, see `exact`)."""
    if not isinstance(base, float):
        base = int(base)
        if abs(base) > 1 and n * (abs(base).bit_length() - 1) > 128:
            raise FoldError(f"{base} ** {n} does not fit i64",
                            "a smaller power (at run time it would wrap)")
        return exact(base ** n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return 1.0 if result is None else result


def unary(kind: str, a):
    """``-a``, ``+a``, ``~a`` or ``not a`` (kind: the operator) on a number."""
    a = plain(a)
    if kind == "not":
        return not a
    if kind == "+":
        return a
    if isinstance(a, float):
        if kind == "~":
            raise FoldError("`~` on a float", "an int")
        return -a
    return exact(-int(a) if kind == "-" else ~int(a))


def compare(op: str, a, b) -> bool:
    """``a op b``: ints compared as i64, an int against a float as an f64."""
    a, b = plain(a), plain(b)
    if isinstance(a, float) or isinstance(b, float):
        a, b = _float(a), _float(b)
    else:
        a, b = wrap(a), wrap(b)
    return {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}[op](a, b)


def minmax(is_min: bool, a, b):
    """``min(a, b)`` / ``max(a, b)``: ``b if b < a else a`` in the type they share."""
    a, b = plain(a), plain(b)
    if isinstance(a, float) or isinstance(b, float):
        a, b = _float(a), _float(b)
    elif not (isinstance(a, bool) and isinstance(b, bool)):
        a, b = wrap(a), wrap(b)
    return b if (b < a if is_min else b > a) else a


def absolute(a):
    a = plain(a)
    return abs(a) if isinstance(a, float) else _signed(abs(wrap(a)))


def cast(ty: Scalar, v):
    """``ty(v)`` as the run-time cast computes it (`arith.convert`)."""
    v = plain(v)
    if ty == BOOL:
        return v != 0 if isinstance(v, float) else wrap(v) != 0
    if ty.is_float:
        if ty == F64:
            return _float(v)
        if not isinstance(v, float):
            return _int_to_f32(wrap(v))
        with np.errstate(over="ignore"):  # 1e308 -> inf, as fptrunc rounds it
            return float(np.float32(v))
    if isinstance(v, float):
        top = float(1 << (ty.bits - 1))
        if v != v:
            return 0
        if v >= top:
            return (1 << (ty.bits - 1)) - 1
        return -(1 << (ty.bits - 1)) if v < -top else int(v)
    return _signed(wrap(v), ty.bits)


def _int_to_f32(v: int) -> float:
    """The f32 nearest ``v`` (ties to even), rounded once as ``sitofp`` does (numpy rounds a
    Python int to f64 first: twice)."""
    with np.errstate(all="ignore"):
        return float(np.float32(_round_bits(v, 24)))


def _round_bits(v: int, digits: int) -> int:
    """``v`` rounded to ``digits`` significant bits, ties to even (exact as a double)."""
    shift = abs(v).bit_length() - digits
    if shift <= 0:
        return v
    q, r = divmod(abs(v), 1 << shift)
    half = 1 << (shift - 1)
    q += r > half or (r == half and q & 1)
    return (q << shift) * (-1 if v < 0 else 1)


def fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once, as ``llvm.fma`` computes it on f64."""
    a, b, c = _float(plain(a)), _float(plain(b)), _float(plain(c))
    if not all(map(math.isfinite, (a, b, c))):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * b + c)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the sign of zero: IEEE's for the sum of a product and c
        return (a * b) + c
    try:
        return float(exact)
    except OverflowError:
        return math.copysign(math.inf, exact)


def libm(name: str, *args: float) -> float:
    """``math.<name>(*args)``: the C library's function, the one ``llvm.<name>`` calls at run
    time (numpy's may be another implementation: its ``2.5 ** 2.5`` is 1 ulp below), with the
    C result where Python raises (inf on overflow, NaN or an infinity on a domain error)."""
    try:
        return getattr(math, name)(*args)
    except OverflowError:
        if name == "pow" and args[0] < 0 and _odd(args[1]):
            return -math.inf
        return math.inf
    except ValueError:
        x = args[0]
        if name == "log" and x == 0:
            return -math.inf
        if name == "pow" and x == 0:  # 0 ** negative
            return math.copysign(math.inf, x) if _odd(args[1]) else math.inf
        return math.nan


def _odd(y: float) -> bool:
    return math.isfinite(y) and y == int(y) and int(y) % 2 == 1
