"""What an expression lowers to: a compile-time constant, a typed IR value, or a buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from .types import BOOL, F64, I64, BufType, Scalar


@dataclass(frozen=True)
class Const:
    """A compile-time Python value: a static parameter, a literal, or arithmetic on them
    (folded with Python's semantics). ints, floats, bools, and tuples/lists of them."""

    value: Any


@dataclass(frozen=True)
class Val:
    """A run-time value of scalar type ``ty``. ``weak``: it came from a literal, so in a binary
    operation it takes the other operand's type (``x * 2.0`` stays f32 when x is f32)."""

    ir: ir.Value
    ty: Scalar
    weak: bool = False


@dataclass(frozen=True)
class BufRef:
    """A buffer: a parameter, a local array or a view. ``extents`` are i64 IR values (None when
    unknown), ``strides`` element strides (i64 values), ``name`` for messages."""

    ptr: ir.Value
    ty: BufType
    extents: tuple
    strides: tuple
    name: str


@dataclass(frozen=True)
class UnknownExtent:
    """``buf.shape[k]`` of an axis annotated ``None``: an error where it is used as a number."""

    buf: str
    axis: int


def const_type(value: Any) -> Scalar | None:
    """The scalar type a Python constant materialises as (None for non-scalars)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return I64
    if isinstance(value, float):
        return F64
    return None


def out_of_range(value: Any, ty: Scalar, storage: bool = False) -> tuple[str, str] | None:
    """(message, what to write instead) when a compile-time int does not fit the int type it
    becomes, else None. numpy raises for such a Python int where the machine code would wrap
    it silently: an i32 takes [-2**31, 2**31), an i64 [-2**63, 2**64) (a u64 bit pattern reads
    as an i64); stored (``storage``), the buffer element's own range."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) \
            or not ty.is_int or ty == BOOL:
        return None
    if storage:
        info = np.iinfo(ty.dtype)
        lo, hi = int(info.min), int(info.max) + 1
    else:
        lo, hi = -(1 << (ty.bits - 1)), 1 << (ty.bits if ty.bits == 64 else ty.bits - 1)
    if lo <= int(value) < hi:
        return None
    wider = "" if storage else " (or make the other operand wider, `i64(...)`)"
    return f"the constant {int(value)} does not fit {ty}", f"a value in [{lo}, {hi - 1}]{wider}"


def wrapped_operand(a: Val, c: Val) -> tuple[int, str, Scalar] | None:
    """Literals adapt: a constant int next to an i32 operand becomes an i32 (`arith.common`).
    One that does not fit would wrap to 32 bits (``v + 2147483648`` is ``v - 2147483648``,
    ``v < 3000000000`` false, ``v % 2**32`` ``v % 0``): then (the constant operand, 0 for
    ``a``, 1 for ``c``; `out_of_range`'s message; the type it does not fit)."""
    if a.weak == c.weak or not (isinstance(a.ty, Scalar) and isinstance(c.ty, Scalar)):
        return None
    at, weak, strong = (0, a, c) if a.weak else (1, c, a)
    if not (weak.ty.is_int and strong.ty.is_int and strong.ty.bits < weak.ty.bits):
        return None
    for value in _constants(weak.ir):
        if (bad := out_of_range(value, strong.ty)) is not None:
            return at, bad[0], strong.ty
    return None


def _constants(value: ir.Value) -> list[int]:
    """The int constants a weak value may be: itself, or those of a conditional expression's
    branches (``v + (3000000000 if c else 1)``: a phi of constants)."""
    if isinstance(value, ir.Constant):
        return [value.constant]
    if isinstance(value, ir.PhiInstr):
        return [k for incoming, _ in value.incomings for k in _constants(incoming)]
    return []


def materialize(value: Any, ty: Scalar | None = None) -> Val:
    """A weak `Val` for a scalar constant (of type ``ty`` if given, else its own type)."""
    ty = ty or const_type(value)
    if ty.is_float:
        return Val(ir.Constant(ty.ir, float(value)), ty, weak=True)
    if ty == BOOL:
        return Val(ir.Constant(ty.ir, int(bool(value))), ty, weak=True)
    bits = ty.bits
    wrapped = int(value) & ((1 << bits) - 1)  # ints wrap: the documented overflow rule
    if wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return Val(ir.Constant(ty.ir, wrapped), ty, weak=True)
