"""Arithmetic promotion: the one table of the type two operands are brought to.

The compiled code (`arith.common`, `arith.binop`, `arith.fpow`, comparisons, ``min``/``max``,
`math_lower` for `kmath` arguments) and the uncompiled twin (`twin_arith`, which the rebuilt
``kernel.py_func`` calls for ``a op b`` of two run-time values, ``x op= v`` and
``buf[k] op= v``: see `slices`) both read it here, and
docs/kernel-language.md shows `table_markdown` (a test keeps them equal).

Operands are *strong* (a value with a type: a variable, a parameter, a buffer element, a
cast) or *weak* (a literal or another compile-time number: ``2``, ``0.5``, ``EPS``, a static
parameter). Two strong operands (`join`):

- the same type: that type (``bool op bool`` in arithmetic is i64; ``& | ^`` and
  comparisons keep bool);
- two ints (bool counts as the narrowest): the wider, i32 or i64;
- two floats: the wider, f64;
- an int and a float: **the float** (``f32 * i64`` is f32). numpy gives f64 for an i32 or
  i64 with an f32; the twin follows this table, not numpy (`twin_arith`).

A weak operand takes the strong one's type when that keeps its kind (`with_literal`): an int
literal joins any type (``i32 + 1`` is i32, checked to fit), a float literal joins a float
(``f32 * 2.0`` is f32); a float literal with an int is f64 (``i32 * 0.5``). Two weak
operands fold at compile time as i64 / f64 (`folding`).

Then per operator: ``/`` of two ints is f64 (`true_divide`); ``**`` with an exponent that is
not a constant int >= 0 is float ``pow`` in the joined float type, f64 for two ints (`power`);
a `kmath` function converts an int argument to f64 first (as numpy does), then joins
(`math_argument`: ``kmath.atan2(f32, i32)`` is f64, ``kmath.atan2(f32, 2)`` f32).
"""

from __future__ import annotations

import operator

import numpy as np

from .types import BOOL, F32, F64, I32, I64, Scalar

#: The types of arithmetic, narrowest first (storage types load as one of these).
ORDER = (BOOL, I32, I64, F32, F64)


def join(a: Scalar, b: Scalar) -> Scalar:
    """The type two strong operands are brought to (before ``bool op bool`` -> i64)."""
    if a == b:
        return a
    if a.is_float and b.is_float:
        return F64
    if a.is_float or b.is_float:
        return a if a.is_float else b
    return I64 if I64 in (a, b) else I32


def with_literal(strong: Scalar, literal: Scalar) -> Scalar:
    """The type of a strong operand meeting a weak one (a literal: i64 or f64)."""
    return strong if (strong.is_float or not literal.is_float) else literal


def operands(a: Scalar, b: Scalar, weak_a: bool, weak_b: bool, arithmetic: bool) -> Scalar:
    """What `arith.common` brings ``a`` and ``b`` to; ``arithmetic`` (not a comparison or a
    bitwise op of two bools) makes bool i64."""
    if weak_a != weak_b:
        ty = with_literal(b, a) if weak_a else with_literal(a, b)
    else:
        ty = join(a, b)
    return I64 if arithmetic and ty == BOOL else ty


def true_divide(a: Scalar, b: Scalar) -> bool:
    """Whether ``a / b`` converts both operands to f64 first (two ints or bools)."""
    return not (a.is_float or b.is_float)


def power(a: Scalar, b: Scalar, weak_a: bool = False, weak_b: bool = False) -> Scalar:
    """The float type of ``a ** b`` when it is not unrolled (``llvm.pow``): `operands`, f64
    for ints (``f32 ** 0.5`` is f32, ``f32 ** f64`` f64, ``i64 ** n`` f64)."""
    ty = operands(a, b, weak_a, weak_b, True)
    return ty if ty.is_float else F64


def math_argument(types: list, weak: list) -> Scalar:
    """The float type of a `kmath` function's arguments: ints become f64, then the strong
    floats join (weak ones adapt); all weak or int: f64."""
    strong = [t if t.is_float else F64 for t, w in zip(types, weak) if not w]
    return max(strong, key=lambda t: t.bits) if strong else F64


def table() -> list[tuple[str, list[str]]]:
    """The rows of the docs' table: each strong type against every strong type, an int
    literal and a float literal (arithmetic ``+ - * // %``)."""
    rows = []
    for a in ORDER:
        cells = [operands(a, b, False, False, True).name for b in ORDER]
        cells += [operands(a, I64, False, True, True).name,
                  operands(a, F64, False, True, True).name]
        rows.append((a.name, cells))
    return rows


def table_markdown() -> str:
    """`table` as the markdown table docs/kernel-language.md shows."""
    head = [t.name for t in ORDER] + ["int literal", "float literal"]
    lines = ["| `a op b` | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in table()]
    return "\n".join(lines)


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
        "//": operator.floordiv, "%": operator.mod, "**": operator.pow}
_IOPS = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
         "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow}


def twin_arith(op: str, a, b, inplace: bool = False):
    """``a op b`` uncompiled (``a op= b`` when ``inplace``), for two run-time values: a numpy
    int or bool scalar meeting a numpy float scalar is converted to that float type first
    (`join`: the float wins; numpy would give f64 for an i32 or i64 with an f32); anything
    else is Python's and numpy's own operator."""
    fa, fb = isinstance(a, np.floating), isinstance(b, np.floating)
    if fa != fb:
        other = b if fa else a
        if isinstance(other, (np.integer, np.bool_)):
            kind = type(a if fa else b)
            a, b = (a, kind(other)) if fa else (kind(other), b)
    return (_IOPS if inplace else _OPS)[op](a, b)


__all__ = ["ORDER", "join", "math_argument", "operands", "power", "table", "table_markdown",
           "true_divide", "twin_arith", "with_literal"]
