"""Casts, arithmetic and comparisons on `Val`s, with Python's semantics where C's differ.

- ``//`` and ``%`` floor (the result of ``%`` has the divisor's sign), for ints and floats.
- Integers wrap on overflow (two's complement, no undefined behaviour): i64 arithmetic is
  numpy's, not Python's unbounded ints. ``x // 0`` is ``x`` and ``x % 0`` is 0 (Python
  raises; the divisor 1 is used so as not to trap), and ``INT_MIN // -1`` wraps to INT_MIN
  instead of trapping. Constants fold with these semantics (`folding`).
- Operand types follow the one table in `promotion`; ``/`` is true division (ints go to f64). ``**`` takes a constant non-negative int exponent
  (square-and-multiply, ints wrapping; a float base up to 64) or floats (``llvm.pow``).
- Shifts: ``a << n`` is 0 for n >= bits, ``a >> n`` is arithmetic and fills with the sign for
  n >= bits (Python's result on the wrapped value); negative n is taken as >= bits.
- ``!=`` on floats is true when either side is NaN (Python), every other float comparison false.
- Float -> int casts truncate and saturate (NaN -> 0); int -> float rounds to nearest.
"""

from __future__ import annotations

from llvmlite import ir

from .. import irutil as u
from . import promotion
from .types import BOOL, F64, I32, I64, Scalar
from .values import Val


def convert(b: ir.IRBuilder, val: Val, to: Scalar) -> Val:
    """``val`` as type ``to`` (any scalar to any scalar; see the module docstring)."""
    src = val.ty
    if src == to:
        return Val(val.ir, to, val.weak)
    v = val.ir
    if to == BOOL:
        out = (b.fcmp_unordered("!=", v, ir.Constant(src.ir, 0.0)) if src.is_float
               else b.icmp_unsigned("!=", v, ir.Constant(src.ir, 0)))
    elif src.is_float and to.is_float:
        out = b.fpext(v, to.ir) if to.bits > src.bits else b.fptrunc(v, to.ir)
    elif src.is_float:
        out = _fptoint_sat(b, v, src, to)
    elif to.is_float:
        out = b.uitofp(v, to.ir) if src.kind in "bu" else b.sitofp(v, to.ir)
    elif to.bits > src.bits:
        out = b.zext(v, to.ir) if src.kind in "bu" else b.sext(v, to.ir)
    elif to.bits < src.bits:
        out = b.trunc(v, to.ir)
    else:
        out = v
    return Val(out, to, val.weak)


def _fptoint_sat(b: ir.IRBuilder, v: ir.Value, src: Scalar, to: Scalar) -> ir.Value:
    """Truncate toward zero, saturating, NaN -> 0, written with compares and selects around a
    plain ``fptosi`` (``llvm.fptosi.sat`` is scalarised by the x86 back end: 16 conversions
    instead of one ``vcvttps2dq``)."""
    if to.kind == "u":
        name = f"llvm.fptoui.sat.i{to.bits}.f{src.bits}"
        fn = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(to.ir, [src.ir]), name=name)
        return b.call(fn, [v])
    hi = ir.Constant(src.ir, float(2 ** (to.bits - 1)))  # exact in every float type
    lo = ir.Constant(src.ir, -float(2 ** (to.bits - 1)))
    inside = b.and_(b.fcmp_ordered(">=", v, lo), b.fcmp_ordered("<", v, hi))
    out = b.fptosi(b.select(inside, v, ir.Constant(src.ir, 0.0)), to.ir)
    out = b.select(b.fcmp_ordered(">=", v, hi), ir.Constant(to.ir, 2 ** (to.bits - 1) - 1), out)
    return b.select(b.fcmp_ordered("<", v, lo), ir.Constant(to.ir, -2 ** (to.bits - 1)), out)


def common(b: ir.IRBuilder, x: Val, y: Val, arith: bool = True) -> tuple[Val, Val, Scalar]:
    """Bring two operands to one type: the `promotion` table (a weak, literal, operand takes
    the other's type when that keeps its kind; bools become i64 in arithmetic)."""
    ty = promotion.operands(x.ty, y.ty, x.weak, y.weak, arith)
    weak = x.weak and y.weak
    return Val(convert(b, x, ty).ir, ty, weak), Val(convert(b, y, ty).ir, ty, weak), ty


def binop(b: ir.IRBuilder, op: str, x: Val, y: Val, flags: tuple) -> Val:
    """``x op y`` for op in + - * / // % & | ^ << >> (``**`` is in `power`)."""
    if op == "/" and promotion.true_divide(x.ty, y.ty):
        x, y = convert(b, x, F64), convert(b, y, F64)
    bitwise = op in ("&", "|", "^")
    x, y, ty = common(b, x, y, arith=not (bitwise and x.ty == BOOL and y.ty == BOOL))
    if ty.is_float:
        return Val(_float_op(b, op, x.ir, y.ir, flags), ty, x.weak)
    return Val(_int_op(b, op, x.ir, y.ir, ty), ty, x.weak)


def _float_op(b: ir.IRBuilder, op: str, a: ir.Value, c: ir.Value, flags: tuple) -> ir.Value:
    if op == "+":
        return b.fadd(a, c, flags=flags)
    if op == "-":
        return b.fsub(a, c, flags=flags)
    if op == "*":
        return b.fmul(a, c, flags=flags)
    if op == "/":
        return b.fdiv(a, c, flags=flags)
    if op in ("//", "%"):
        return _float_floor_divmod(b, op, a, c, flags)
    raise TypeError(f"operator {op} needs integer operands")


def _float_floor_divmod(b: ir.IRBuilder, op: str, a: ir.Value, c: ir.Value,
                        flags: tuple) -> ir.Value:
    """Python's (and numpy's) float ``//`` and ``%``: from the exact remainder (``frem``),
    not ``floor(a / c)``, which rounds up across an integer (``1.0 // 0.1`` is 9.0, while
    ``1.0 / 0.1`` rounds to 10.0); a zero result of ``%`` has the divisor's sign. A zero
    divisor gives numpy's ``a / c`` (+-inf or NaN) and a NaN remainder."""
    zero, one, half = (ir.Constant(a.type, v) for v in (0.0, 1.0, 0.5))
    mod = b.frem(a, c)
    wrong_sign = b.and_(b.fcmp_ordered("!=", mod, zero),
                        b.xor(b.fcmp_ordered("<", mod, zero), b.fcmp_ordered("<", c, zero)))
    if op == "%":
        fixed = b.select(wrong_sign, b.fadd(mod, c), mod)
        return b.select(b.fcmp_ordered("==", mod, zero),
                        u.intrinsic(b, "llvm.copysign", zero, c), fixed)
    div = b.fdiv(b.fsub(a, mod), c, flags=flags)
    div = b.select(wrong_sign, b.fsub(div, one), div)
    low = u.intrinsic(b, "llvm.floor", div)
    low = b.select(b.fcmp_ordered(">", b.fsub(div, low), half), b.fadd(low, one), low)
    quotient = b.fdiv(a, c, flags=flags)
    out = b.select(b.fcmp_unordered("!=", div, zero), low,
                   u.intrinsic(b, "llvm.copysign", zero, quotient))
    return b.select(b.fcmp_ordered("==", c, zero), quotient, out)


def _int_op(b: ir.IRBuilder, op: str, a: ir.Value, c: ir.Value, ty: Scalar) -> ir.Value:
    simple = {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor}
    if op in simple:
        return simple[op](a, c)
    if op in ("//", "%"):
        return _floor_divmod(b, op, a, c, ty)
    if op in ("<<", ">>"):
        width = ir.Constant(ty.ir, ty.bits)
        big = b.icmp_unsigned(">=", c, width)  # negative counts are huge unsigned
        if op == "<<":
            return b.select(big, ir.Constant(ty.ir, 0), b.shl(a, b.select(big, zero_of(ty), c)))
        return b.ashr(a, b.select(big, ir.Constant(ty.ir, ty.bits - 1), c))
    raise TypeError(f"operator {op} is not defined on {ty}")


def zero_of(ty: Scalar) -> ir.Constant:
    return ir.Constant(ty.ir, 0.0 if ty.is_float else 0)


def _floor_divmod(b: ir.IRBuilder, op: str, a: ir.Value, c: ir.Value, ty: Scalar) -> ir.Value:
    zero, one = ir.Constant(ty.ir, 0), ir.Constant(ty.ir, 1)
    safe = c
    minus_one = None
    if not (isinstance(c, ir.Constant) and c.constant not in (0, -1)):
        # x86 traps on a zero divisor and on INT_MIN / -1: divide by 1 there, fix up below.
        minus_one = b.icmp_signed("==", c, ir.Constant(ty.ir, -1))
        bad = b.or_(b.icmp_signed("==", c, zero), minus_one)
        safe = b.select(bad, one, c)
    q, r = b.sdiv(a, safe), b.srem(a, safe)
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
    if op == "//":
        out = b.sub(q, b.zext(adjust, ty.ir))
        return b.select(minus_one, b.sub(zero, a), out) if minus_one is not None else out
    return b.add(r, b.select(adjust, safe, zero))


def power(b: ir.IRBuilder, x: Val, exponent, flags: tuple) -> Val:
    """``x ** exponent``: an int constant >= 0 unrolls (at most 64 for a float ``x``: past
    that ``llvm.pow`` rounds better than 7+ multiplications), anything else is float
    ``llvm.pow``."""
    if isinstance(exponent, int) and not isinstance(exponent, bool) and 0 <= exponent < 2**63 \
            and (exponent <= 64 or not x.ty.is_float):
        if x.ty == BOOL:
            x = convert(b, x, I64)
        result, base, n = None, x.ir, exponent
        while n:  # square-and-multiply: ~log2(n) multiplications
            if n & 1:
                result = base if result is None else _mul(b, result, base, x.ty, flags)
            n >>= 1
            if n:
                base = _mul(b, base, base, x.ty, flags)
        if result is None:
            result = ir.Constant(x.ty.ir, 1.0 if x.ty.is_float else 1)
        return Val(result, x.ty, x.weak)
    return None


def fpow(b: ir.IRBuilder, x: Val, y: Val, flags: tuple) -> Val:
    ty = promotion.power(x.ty, y.ty, x.weak, y.weak)
    x, y = convert(b, x, ty), convert(b, y, ty)
    return Val(u.intrinsic(b, "llvm.pow", x.ir, y.ir, flags=flags), ty, x.weak and y.weak)


def _mul(b, p, q, ty, flags):
    return b.fmul(p, q, flags=flags) if ty.is_float else b.mul(p, q)


_FCMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=="}


def compare(b: ir.IRBuilder, op: str, x: Val, y: Val) -> Val:
    """``x op y`` for op in < <= > >= == != -> a bool `Val`."""
    x, y, ty = common(b, x, y, arith=False)
    if ty.is_float:
        out = (b.fcmp_unordered("!=", x.ir, y.ir) if op == "!="
               else b.fcmp_ordered(_FCMP[op], x.ir, y.ir))
    elif ty == BOOL:
        out = b.icmp_unsigned(op, x.ir, y.ir)
    else:
        out = b.icmp_signed(op, x.ir, y.ir)
    return Val(out, BOOL)


def negate(b: ir.IRBuilder, x: Val, flags: tuple) -> Val:
    if x.ty.is_float:
        return Val(b.fneg(x.ir, flags=flags), x.ty, x.weak)
    if x.ty == BOOL:
        x = convert(b, x, I64)
    return Val(b.sub(ir.Constant(x.ty.ir, 0), x.ir), x.ty, x.weak)


def invert(b: ir.IRBuilder, x: Val) -> Val:
    if x.ty == BOOL:
        x = convert(b, x, I64)
    return Val(b.xor(x.ir, ir.Constant(x.ty.ir, -1)), x.ty, x.weak)


def truth(b: ir.IRBuilder, x: Val) -> Val:
    """Python truthiness: nonzero (NaN is true)."""
    return convert(b, x, BOOL)


def int_index(b: ir.IRBuilder, x: Val) -> ir.Value:
    """An index value as i64 (bools and i32 widen)."""
    if x.ty.is_float:
        raise TypeError("float index")
    return convert(b, x, I64).ir


__all__ = ["convert", "common", "binop", "power", "fpow", "compare", "negate", "invert",
           "truth", "int_index", "I32"]
