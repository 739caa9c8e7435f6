"""``atomic_add(buf, index, v)``, ``atomic_min``, ``atomic_max``: read-modify-write of one buffer
element that concurrent prange chunks may do to the same element.

``index`` is what you would write inside ``buf[...]`` (``i``, or ``(y, x)``); ``v`` is converted
to the element type as a store converts it. They are statements (no value): the value an atomic
returns would tell which thread came first, and kernels give the same bits on any number of
threads. Deterministic by construction:

- ints (``i8`` to ``u64``): one ``atomicrmw add / min / max`` (``umin``/``umax`` for unsigned
  elements); integer addition wraps and is associative, so the order does not matter;
- float ``atomic_min`` / ``atomic_max``: a compare-and-swap loop that stores ``v`` when it is
  below (above) the element, or equal to it with the sign that orders first (-0.0 below +0.0),
  so ties settle the same way in any order; a NaN is never stored, and an element that is NaN
  stays NaN (``v < NaN`` is false), as the uncompiled sequential ``b if b < a else a`` does;
- float ``atomic_add`` is refused: the rounding of a float sum depends on the order the
  threads add in. Sum floats with a prange reduction (``acc += v``: a fixed tree), or
  accumulate fixed-point ints.

Uncompiled (`atomic_add` and friends here) they are the same read-modify-write on the array.
The lowering functions take the `lower.Lowerer` as ``lw``.
"""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .arith import convert
from .values import BufRef, Const


def atomic_add(buf, index, value) -> None:
    """``buf[index] += value`` (ints wrap as a store wraps; floats are refused compiled)."""
    from .slices import stored

    buf[index] = stored(buf, _as_int(buf[index]) + _as_int(value)) \
        if buf.dtype.kind in "iu" else buf[index] + value


def atomic_min(buf, index, value) -> None:
    """``buf[index] = min(buf[index], value)``; floats: -0.0 below +0.0, NaN never stored."""
    _settle(buf, index, value, lower=True)


def atomic_max(buf, index, value) -> None:
    """``buf[index] = max(buf[index], value)``; floats: +0.0 above -0.0, NaN never stored."""
    _settle(buf, index, value, lower=False)


def _as_int(x) -> int:
    return int(x)


def _settle(buf, index, value, lower: bool) -> None:
    from .slices import stored

    new = np.asarray(stored(buf, value)).astype(buf.dtype)[()]
    old = buf[index]
    if lower:
        better = new < old or (new == old and np.signbit(new) and not np.signbit(old))
    else:
        better = new > old or (new == old and np.signbit(old) and not np.signbit(new))
    if better:
        buf[index] = new


ATOMICS = {atomic_add: "add", atomic_min: "min", atomic_max: "max"}


def atomic(lw, fn, node: ast.Call) -> Const:
    name, op = fn.__name__, ATOMICS[fn]
    if not (isinstance(lw.at, ast.Expr) and lw.at.value is node):
        lw.fail(node, f"{name}() is a statement, with no value: the old value would say "
                "which thread came first", f"`{name}(...)` on a line of its own")
    if len(node.args) != 3:
        lw.fail(node, f"{name}() takes a buffer, an index and a value",
                f"`{name}(buf, i, v)` or `{name}(buf, (y, x), v)`")
    base = lw.expr(node.args[0])
    if not isinstance(base, BufRef):
        lw.fail(node.args[0], f"{name}() of something that is not a buffer")
    target = ast.copy_location(ast.Subscript(node.args[0], node.args[1], ast.Load()), node)
    ty = base.ty.dtype
    if ty.is_float and op == "add":
        lw.fail(node, f"atomic_add on the float buffer '{base.name}': the rounding of a "
                "float sum depends on the order the threads add in, so the bits would "
                "change from run to run", "a prange reduction (`acc += v`, combined in a "
                "fixed order) or an int buffer (fixed point)")
    at = lw.element(base, target)
    lw.mark_written(base)
    val = lw.value(lw.expr(node.args[2]), node.args[2], want=ty.compute)
    if val.ty.is_float and ty.is_int:
        lw.fail(node.args[2], f"{name}() of {val.ty} into {ty} buffer '{base.name}'",
                f"`{ty.compute}(...)` (truncates)")
    val = convert(lw.b, convert(lw.b, val, ty.compute), ty).ir
    if ty.is_int:
        kind = op if op == "add" or ty.kind == "i" else f"u{op}"
        lw.b.atomic_rmw(kind, at, val, "monotonic")
    else:
        float_settle(lw, at, val, op == "min")
    return Const(None)


def float_settle(lw, at: ir.Value, val: ir.Value, lower: bool) -> None:
    """The compare-and-swap loop of a float ``atomic_min`` / ``atomic_max``."""
    ity = ir.IntType(32 if isinstance(val.type, ir.FloatType) else 64)
    bits = lw.b.bitcast(val, ity)
    head, swap, done = (lw.fn.append_basic_block(f"atomic.{x}")
                        for x in ("head", "swap", "done"))
    first = lw.b.load_atomic(at, "monotonic", ity.width // 8, typ=ity)
    pre = lw.b.block
    lw.b.branch(head)
    lw.b.position_at_end(head)
    old_bits = lw.b.phi(ity)
    old_bits.add_incoming(first, pre)
    old = lw.b.bitcast(old_bits, val.type)
    strict = lw.b.fcmp_ordered("<" if lower else ">", val, old)
    tie = lw.b.fcmp_ordered("==", val, old)
    zero = ir.Constant(ity, 0)
    neg_new = lw.b.icmp_signed("<", bits, zero)
    neg_old = lw.b.icmp_signed("<", old_bits, zero)
    wins_tie = lw.b.and_(neg_new, lw.b.not_(neg_old)) if lower else \
        lw.b.and_(neg_old, lw.b.not_(neg_new))
    better = lw.b.or_(strict, lw.b.and_(tie, wins_tie))
    lw.b.cbranch(better, swap, done)
    lw.b.position_at_end(swap)
    pair = lw.b.cmpxchg(at, old_bits, bits, "monotonic", "monotonic")
    old_bits.add_incoming(lw.b.extract_value(pair, 0), swap)
    lw.b.cbranch(lw.b.extract_value(pair, 1), done, head)
    lw.b.position_at_end(done)


__all__ = ["ATOMICS", "atomic_add", "atomic_max", "atomic_min"]
