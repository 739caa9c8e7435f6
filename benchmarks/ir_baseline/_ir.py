"""The IR helpers the hand-built baselines use: the package's `irutil` (what the kernel
language's lowering still needs) plus the few that only these baselines need since every
kernel was ported (float constants, vector stores, fmin/fmax)."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile.irutil import *  # noqa: F401,F403 (the baselines' `u.` namespace)
from cuvil_perception.compile.irutil import F32, F64, _elem_bytes, gep

I8 = ir.IntType(8)


def const_f32(v: float) -> ir.Constant:
    return ir.Constant(F32, float(v))


def const_f64(v: float) -> ir.Constant:
    return ir.Constant(F64, float(v))


def store_vec(builder: ir.IRBuilder, value: ir.Value, ptr: ir.Value,
              index: ir.Value | int) -> None:
    """Store vector ``value`` to the elements from ``ptr[index]`` on (element-aligned)."""
    elem = value.type.element
    builder.store(value, gep(builder, ptr, index, elem), align=_elem_bytes(elem))


def fmin(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """``a < b ? a : b`` (x86 ``minps`` semantics: if either is NaN the result is ``b``)."""
    return builder.select(builder.fcmp_ordered("<", a, b), a, b)


def fmax(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """``a > b ? a : b`` (x86 ``maxps`` semantics: if either is NaN the result is ``b``)."""
    return builder.select(builder.fcmp_ordered(">", a, b), a, b)
