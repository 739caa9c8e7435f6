"""The IR helpers the hand-built baselines use: the package's `irutil` (what the kernel
language's lowering still needs) plus the few that only these baselines need since every
kernel was ported (scalar loads, float constants, vector stores, fmin/fmax, horizontal
reductions)."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile.irutil import *  # noqa: F401,F403 (the baselines' `u.` namespace)
from cuvil_perception.compile.fastmath import note_helper
from cuvil_perception.compile.irutil import F32, F64, Flags, _elem_bytes, gep

I8 = ir.IntType(8)
#: The flag `reduce_fadd` uses when the caller passes none (a tree-shaped sum).
REDUCE_FADD_FASTMATH = ("reassoc",)


def load_at(builder: ir.IRBuilder, ptr: ir.Value, index: ir.Value | int, elem_type: ir.Type,
            name: str = "") -> ir.Value:
    """``ptr[index]``."""
    return builder.load(gep(builder, ptr, index, elem_type), name=name, typ=elem_type)


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


def _reduce(builder: ir.IRBuilder, name: str, args: list[ir.Value], vec_v: ir.Value,
            flags: Flags) -> ir.Value:
    ty = vec_v.type
    if not isinstance(ty, ir.VectorType):
        raise ValueError(f"{name} needs a vector operand, got {ty}")
    suffix = f"v{ty.count}{'f32' if ty.element == F32 else 'f64'}"
    full = f"{name}.{suffix}"
    fn = builder.module.globals.get(full)
    if fn is None:
        fn = ir.Function(builder.module,
                         ir.FunctionType(ty.element, [a.type for a in args]), name=full)
    return builder.call(fn, args, fastmath=tuple(flags))


def reduce_fadd(builder: ir.IRBuilder, v: ir.Value, flags: Flags | None = None) -> ir.Value:
    """Sum of the lanes of a float vector. By default ``reassoc`` (a tree-shaped sum), declared
    as this helper's own flag; flags passed explicitly are the kernel's (``flags=()`` for the
    strict left-to-right order)."""
    if flags is None:
        flags = REDUCE_FADD_FASTMATH
        note_helper(builder.module, "ir_baseline.reduce_fadd", flags)
    start = ir.Constant(v.type.element, -0.0)
    return _reduce(builder, "llvm.vector.reduce.fadd", [start, v], v, flags)


def reduce_fmax(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Max of the lanes of a float vector (``llvm.vector.reduce.fmax``: NaN lanes ignored)."""
    return _reduce(builder, "llvm.vector.reduce.fmax", [v], v, ())
