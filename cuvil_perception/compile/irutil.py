"""Small llvmlite IR helpers of the kernel language's lowering (`lang`); every kernel is
written in the language, so this and `lang.trampoline` (the native entry of ``kernel(...)``,
which reads CPython objects no kernel can) are all the hand-built IR left in the package.

Types: ``PTR`` (opaque pointer; LLVM 22), ``I1 I32 I64 F32 F64``, ``vec(elem, n)``.
Memory: ``gep``, ``store_at`` (element-indexed, ``inbounds``), ``load_vec``
(element-aligned vector load), ``entry_alloca``.
Control: ``for_range`` (a canonical counted loop the loop vectoriser recognises).
Math: ``vexp`` (polynomial exp, vectorisable), ``sigmoid``, ``clamp``, ``intrinsic`` calls
(``llvm.floor`` ...).

Every math helper works on f32 scalars and on ``<N x float>`` vectors alike (the same code is used
inside loops that the loop vectoriser widens, and in hand-written vector code).

``vexp`` accuracy (f32 against float64 ``numpy.exp``; measured over 4 million points, bounds
asserted in ``tests/test_compile_irutil.py``):

- ``x`` in [-87.33, 88.72] (normal results): max relative error <= 1.5e-7 (measured 8.4e-8,
  about 1.4 ulp).
- ``x`` in [-104, -87.33]: subnormal results, absolute error <= 2**-149 (one subnormal step;
  measured 0.75 of it); below -104 (including ``-inf``) the result is ``+0.0``.
- ``x`` > 88.7228 (including ``+inf``): ``+inf``. ``NaN`` -> ``NaN``.

Method: Cody-Waite range reduction ``x = n*ln2 + r``, ``|r| <= ln2/2`` with ``ln2`` split in two
(0.693359375 + -2.12194440e-4, the first part exact in 9 bits so ``n*C1`` is exact), then the
Cephes ``expf`` polynomial ``1 + r + r^2 * P(r)`` (degree 7 overall), then scaling by ``2**n``
done as two multiplications by ``2**(n>>1)`` and ``2**(n - (n>>1))`` so that neither factor
overflows or goes subnormal (this is what makes the subnormal range and the overflow to ``inf``
come out right without extra branches). Only ``contract`` is used (FMA in the polynomial); never
``reassoc`` here, which would let LLVM fold the two-part ``ln2`` back into one and lose the
reduction. ``vexp`` declares that flag as its own (`VEXP_FASTMATH`, recorded with
`fastmath.note_helper`), so a kernel calling it need not declare ``contract`` for it.

``sigmoid(x) = 1 / (1 + vexp(-x))`` with an IEEE division: absolute error <= 1e-7 on the whole line
(measured 8.9e-8 on [-100, 100]), relative error <= 2e-7 for x >= -87 (measured 1.4e-7; results
>= 1.6e-38); ``x < -88.73`` -> ``+0.0`` (the true value is below 3e-39), ``+inf`` -> 1,
``-inf`` -> 0, ``NaN`` -> ``NaN``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from llvmlite import ir

from .fastmath import note_helper

PTR = ir.PointerType()
I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
VOID = ir.VoidType()

Flags = Sequence[str]


def vec(elem: ir.Type, n: int) -> ir.VectorType:
    """``<n x elem>``."""
    return ir.VectorType(elem, n)


def const_i32(v: int) -> ir.Constant:
    return ir.Constant(I32, int(v))


def const_i64(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def splat(value: ir.Constant | float | int, ty: ir.Type) -> ir.Constant:
    """A constant of type ``ty`` (scalar or vector) with every lane equal to ``value``."""
    if isinstance(value, ir.Constant):
        value = value.constant
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
    return ir.Constant(ty, value)


def _elem(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def _like(ty: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem`` with the vector shape of ``ty`` (scalar if ``ty`` is scalar)."""
    return ir.VectorType(elem, ty.count) if isinstance(ty, ir.VectorType) else elem


# -- memory -------------------------------------------------------------------------------------
def gep(builder: ir.IRBuilder, ptr: ir.Value, index: ir.Value | int, elem_type: ir.Type,
        name: str = "") -> ir.Value:
    """Address of ``ptr[index]`` for elements of ``elem_type`` (``inbounds``)."""
    if isinstance(index, int):
        index = const_i64(index)
    return builder.gep(ptr, [index], inbounds=True, name=name, source_etype=elem_type)


def store_at(builder: ir.IRBuilder, value: ir.Value, ptr: ir.Value,
             index: ir.Value | int) -> None:
    """``ptr[index] = value`` (element type taken from ``value``)."""
    builder.store(value, gep(builder, ptr, index, value.type))


def load_vec(builder: ir.IRBuilder, ptr: ir.Value, index: ir.Value | int, vty: ir.VectorType,
             name: str = "") -> ir.Value:
    """``vty.count`` consecutive elements starting at element ``ptr[index]``, as one vector.

    The load is only element-aligned: without an explicit ``align`` LLVM assumes the vector's
    ABI alignment (64 bytes for <16 x float>) and may emit aligned moves that fault on numpy
    views.
    """
    return builder.load(gep(builder, ptr, index, vty.element), name=name,
                        align=_elem_bytes(vty.element), typ=vty)


def _elem_bytes(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {F32: 4, F64: 8}.get(ty, 8)


def entry_alloca(builder: ir.IRBuilder, ty: ir.Type, name: str = "",
                 init: ir.Value | None = None) -> ir.Value:
    """A stack slot in the function's entry block (so mem2reg turns it into SSA values).

    Use it for loop-carried scalars (accumulators, counters); ``init`` is stored at the current
    position.
    """
    entry = builder.function.entry_basic_block
    with builder.goto_block(entry):
        if entry.instructions:
            builder.position_before(entry.instructions[0])
        slot = builder.alloca(ty, name=name)
    if init is not None:
        builder.store(init, slot)
    return slot


# -- control flow -------------------------------------------------------------------------------
@contextmanager
def for_range(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int,
              step: int = 1, name: str = "i") -> Iterator[ir.Value]:
    """``for i in range(start, stop, step)`` with an i64 induction variable.

    ``start``/``stop``: Python ints or i64 values. Yields the index; the body is whatever the
    caller emits inside the ``with``. After the block the builder sits in the loop exit.
    ``step`` is a Python int (> 0 or < 0) so the loop stays in the canonical form the vectoriser
    needs.
    """
    if step == 0:
        raise ValueError("for_range: step must not be 0")
    start = const_i64(start) if isinstance(start, int) else start
    stop = const_i64(stop) if isinstance(stop, int) else stop
    pre = builder.block
    head = builder.append_basic_block(f"{name}.head")
    body = builder.append_basic_block(f"{name}.body")
    done = builder.append_basic_block(f"{name}.end")
    builder.branch(head)
    builder.position_at_end(head)
    idx = builder.phi(I64, name=name)
    idx.add_incoming(start, pre)
    keep = builder.icmp_signed("<" if step > 0 else ">", idx, stop)
    builder.cbranch(keep, body, done)
    builder.position_at_end(body)
    yield idx
    nxt = builder.add(idx, const_i64(step), name=f"{name}.next", flags=("nsw",))
    idx.add_incoming(nxt, builder.block)
    builder.branch(head)
    builder.position_at_end(done)


# -- math ---------------------------------------------------------------------------------------
def intrinsic(builder: ir.IRBuilder, name: str, *args: ir.Value, flags: Flags = ()) -> ir.Value:
    """Call the overloaded LLVM intrinsic ``name`` (e.g. ``"llvm.floor"``) on ``args``.

    The overload is the type of the first argument (``llvm.floor.v16f32`` for a vector);
    the result has that type too (true of every elementwise fp intrinsic).
    """
    ty = args[0].type
    module = builder.module
    elem = _elem(ty)
    suffix = {F32: "f32", F64: "f64"}.get(elem, str(elem).replace(" ", ""))
    if isinstance(ty, ir.VectorType):
        suffix = f"v{ty.count}{suffix}"
    full = f"{name}.{suffix}"
    fn = module.globals.get(full)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [a.type for a in args]), name=full)
    return builder.call(fn, list(args), fastmath=tuple(flags))


def clamp(builder: ir.IRBuilder, x: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """``min(max(x, lo), hi)``; a NaN ``x`` stays NaN."""
    x = builder.select(builder.fcmp_ordered("<", x, lo), lo, x)
    return builder.select(builder.fcmp_ordered(">", x, hi), hi, x)


_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_LO = -104.0               # exp(-104) < 2**-150: the scaling rounds it to +0
_EXP_HI = 88.8                   # above: exp(x) > FLT_MAX; the scaling overflows to +inf
#: The flags `vexp` (and `sigmoid` through it) puts on its polynomial, whatever the kernel
#: declares: ``contract`` lets the Horner steps become FMAs (the accuracy above is measured so).
VEXP_FASTMATH = ("contract",)
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
             4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)   # Cephes expf, r^7 .. r^2


def vexp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``exp(x)`` for f32 scalars or vectors; see the module docstring for its accuracy."""
    ty = x.type
    c = lambda v: splat(float(v), ty)  # noqa: E731 - local constant shorthand
    ff = VEXP_FASTMATH
    note_helper(builder.module, "irutil.vexp", ff)
    xc = clamp(builder, x, c(_EXP_LO), c(_EXP_HI))
    n = intrinsic(builder, "llvm.rint", builder.fmul(xc, c(_LOG2E)))
    r = builder.fsub(xc, builder.fmul(n, c(_LN2_HI)))
    r = builder.fsub(r, builder.fmul(n, c(_LN2_LO)))
    p = c(_EXP_POLY[0])
    for coef in _EXP_POLY[1:]:
        p = builder.fadd(builder.fmul(p, r, flags=ff), c(coef), flags=ff)
    r2 = builder.fmul(r, r)
    y = builder.fadd(builder.fadd(builder.fmul(p, r2, flags=ff), r, flags=ff), c(1.0), flags=ff)
    y = builder.fmul(builder.fmul(y, _pow2(builder, n, half=True)), _pow2(builder, n, half=False))
    # NaN: the clamp passed it through, fptosi made poison of it; pick x itself instead.
    return builder.select(builder.fcmp_unordered("uno", x, x), x, y)


def _pow2(builder: ir.IRBuilder, n: ir.Value, half: bool) -> ir.Value:
    """``2**(n>>1)`` (half) or ``2**(n - (n>>1))`` as f32 from exponent bits; n in [-150, 129]."""
    ity = _like(n.type, I32)
    ni = builder.fptosi(n, ity)
    lo = builder.ashr(ni, splat(1, ity))
    e = lo if half else builder.sub(ni, lo)
    bits = builder.shl(builder.add(e, splat(127, ity)), splat(23, ity))
    return builder.bitcast(bits, n.type)


def sigmoid(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``1 / (1 + exp(-x))`` for f32 scalars or vectors; accuracy in the module docstring."""
    one = splat(1.0, x.type)
    e = vexp(builder, builder.fneg(x))
    return builder.fdiv(one, builder.fadd(one, e))

