"""Calls inside kernels: casts, ``min/max/abs/len``, ``local`` arrays, the `kmath` module,
and helpers (``@inline`` functions, inlined at each call). A call's arguments (`expr.Values.args`)
and a debug build's index checks (`expr.Values.check_index`) are the Lowerer's own.

``min(a, b)`` is ``b if b < a else a`` and ``max(a, b)`` is ``b if b > a else a``, Python's
definition (with a NaN, the first argument is returned unless the NaN is first).
"""

from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir

from .. import irutil as u
from . import folding, kmath, lane_lower as lanes, simd, vector_lower as vec
from .arith import compare, convert, negate
from .atomic_lower import ATOMICS, atomic
from .fold_lower import fold_call, not_a_number
from .math_lower import bit_count, math
from .scope import Frame, Var
from .simd_lower import simd_call
from .slices import value_slices
from .source import Source, remember
from .types import (BOOL, F64, I64, BufType, Scalar, VecType, address, local, select,
                    view)
from .prange import prange
from .values import BufRef, Const, Val
from .vector_lower import vec_abs, vec_cast

MAX_LOCAL_ELEMENTS = 4096     # a local array lives on the stack: keep it small
MAX_LOCAL_BYTES = 256 * 1024  # all of a kernel's local arrays (a thread's stack may be 8 MiB)
MAX_INLINE_DEPTH = 16


def inline(fn):
    """Mark a module-level function as a helper that kernels may call (inlined at each call).

    Uncompiled it is the plain function (rebuilt so that its slice reads are values: see
    `slices`)."""
    remember(fn)
    fn = value_slices(fn)
    fn.__cuvil_inline__ = True
    return fn


def unroll(n: int) -> range:
    """``for i in unroll(n)``: a loop the compiler unrolls (``i`` is a constant in each copy;
    ``n`` must be a compile-time int). Uncompiled it is ``range(n)``."""
    return range(n)


def bits(word):
    """``for bit in bits(word)``: the positions of the set bits of an integer ``word``, lowest
    first, as ints (a loop over a sparse bitmap runs once per set bit, not once per bit).

    Uncompiled it is this generator. The width is the numpy scalar's (a Python int counts as
    i64), and a negative word gives the bits of its two's-complement pattern (an i64 -1 gives
    0 to 63); floats and bools are refused, as the compiler refuses them."""
    if isinstance(word, (bool, np.bool_)) or not isinstance(word, (int, np.integer)):
        raise TypeError(f"bits() of a {type(word).__name__}; it needs an integer word")
    width = word.dtype.itemsize * 8 if isinstance(word, np.integer) else 64
    return _set_bits(int(word) & ((1 << width) - 1))


def _set_bits(rest: int):
    while rest:
        lowest = rest & -rest
        yield lowest.bit_length() - 1
        rest ^= lowest


def cast(lw, ty: Scalar, node: ast.Call, builtin: bool = False):
    (x,) = lw.args(node, 1)
    if ty.compute != ty:
        lw.fail(node, f"{ty} is a storage type", f"`{ty.compute}(...)`")
    if isinstance(x, Val) and isinstance(x.ty, VecType) and not builtin:
        return vec_cast(lw, ty, x)
    if isinstance(x, Const):  # a typed value: `best = f32(-1e30)` makes best an f32
        if not folding.is_number(x.value):
            not_a_number(lw, node)
            lw.fail(node, f"`{ast.unparse(node)}`: a cast of a "
                    f"{type(x.value).__name__}", "a number")
        folded = fold_call(lw, node, folding.cast, ty, x.value).value
        return Val(lw.value(Const(folded), node, want=ty).ir, ty)
    val = lw.value(x, node.args[0])
    return Val(convert(lw.b, val, ty).ir, ty)


def minmax(lw, is_min: bool, node: ast.Call):
    if len(node.args) < 2:
        lw.fail(node, "min()/max() of one argument", "two or more numbers")
    items = lw.args(node, len(node.args))
    best = items[0]
    for item, arg in zip(items[1:], node.args[1:]):
        if isinstance(best, Const) and isinstance(item, Const):
            if folding.is_number(best.value) and folding.is_number(item.value):
                best = fold_call(lw, node, folding.minmax, is_min, best.value, item.value)
            else:
                best = fold_call(lw, node, min if is_min else max, best.value, item.value)
            continue
        a, c = lw.value(best, node), lw.value(item, arg)
        lw.joins(a, c, node.args[0], arg)
        if a.ty != c.ty:
            from .arith import common

            a, c, _ = common(lw.b, a, c, arith=False)
        better = compare(lw.b, "<" if is_min else ">", c, a)
        best = Val(lw.b.select(better.ir, c.ir, a.ir), a.ty, a.weak and c.weak)
    return best


def absolute(lw, node: ast.Call):
    (x,) = lw.args(node, 1)
    if isinstance(x, Const):
        return fold_call(lw, node, folding.absolute, x.value)
    val = lw.value(x, node.args[0], vector=True)
    if isinstance(val.ty, VecType):
        return vec_abs(lw, val, node)
    if val.ty.is_float:
        return Val(u.intrinsic(lw.b, "llvm.fabs", val.ir), val.ty, val.weak)
    if val.ty == BOOL:  # abs(True) is the int 1, as in Python
        val = convert(lw.b, val, I64)
    neg = negate(lw.b, val, ())
    below = lw.b.icmp_signed("<", neg.ir, ir.Constant(neg.ty.ir, 0))
    return Val(lw.b.select(below, val.ir, neg.ir), neg.ty, val.weak)


def length(lw, node: ast.Call):
    (x,) = lw.args(node, 1)
    if isinstance(x, Const) and isinstance(x.value, (tuple, list)):
        return Const(len(x.value))
    if isinstance(x, BufRef):
        ext = x.extents[0]
        if ext is None:
            lw.fail(node, f"buffer '{x.name}' has no known first extent",
                    "an extent in its annotation, `Buf[f32, \"n\"]`")
        return Const(ext.constant) if isinstance(ext, ir.Constant) else Val(ext, I64)
    lw.fail(node, "len() of a number")


def local_array(lw, node: ast.Call) -> BufRef:
    dtype = lw.expr(node.args[0]) if node.args else None
    if not (isinstance(dtype, Const) and isinstance(dtype.value, Scalar)):
        lw.fail(node, "local() needs an element type first", "`local(f32, 16)`")
    dims = [lw.const_int(a, "a local array extent") for a in node.args[1:]]
    total = 1
    for d in dims:
        total *= d
    if not dims or total <= 0 or total > MAX_LOCAL_ELEMENTS:
        lw.fail(node, f"a local array needs 1 to {MAX_LOCAL_ELEMENTS} elements",
                "a buffer parameter for large scratch space")
    lw.local_bytes += total * max(1, dtype.value.bits // 8)
    if lw.local_bytes > MAX_LOCAL_BYTES:  # 600 x 32 KiB overflowed the stack: a segfault
        lw.fail(node, f"the kernel's local arrays take {lw.local_bytes} bytes of stack "
                f"(at most {MAX_LOCAL_BYTES}); each local() in an unrolled loop or an "
                "inlined helper is another array", "one local() before the loop, or a "
                "buffer parameter")
    elem = dtype.value.ir
    entry = lw.fn.entry_basic_block
    with lw.b.goto_block(entry):
        if entry.instructions:
            lw.b.position_before(entry.instructions[0])
        slot = lw.b.alloca(elem, size=u.const_i64(total), name="local")
        slot.align = 64  # a cache line: whole-vector and whole-word access stay aligned
        slot.type = u.PTR  # opaque, like a parameter's (llvmlite checks stores through
        # a typed `float*` against float, which a `simd` vector store is not)
    zero = ir.Constant(elem, 0.0 if dtype.value.is_float else 0)
    with u.for_range(lw.b, 0, total, name="zero") as k:  # like numpy.zeros (a memset)
        u.store_at(lw.b, zero, slot, k)
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(u.const_i64(acc))
        acc *= d
    return BufRef(slot, BufType(dtype.value, tuple(dims)),
                  tuple(u.const_i64(d) for d in dims), tuple(reversed(strides)),
                  f"local@{node.lineno}")


def view_call(lw, node: ast.Call) -> BufRef:
    """``view(address, dtype, extents...)``: a buffer at an address (an int value)."""
    if len(node.args) < 3:
        lw.fail(node, "view() needs an address, an element type and extents",
                "`view(table[k], f32, n, m)`")
    address = lw.value(lw.expr(node.args[0]), node.args[0])
    dtype = lw.expr(node.args[1])
    if address.ty.is_float or not (isinstance(dtype, Const)
                                   and isinstance(dtype.value, Scalar)):
        lw.fail(node, "view() needs an int address and an element type")
    extents = []
    for a in node.args[2:]:
        x = lw.expr(a)
        extents.append(u.const_i64(x.value) if isinstance(x, Const)
                       else convert(lw.b, lw.value(x, a), I64).ir)
    ptr = lw.b.inttoptr(convert(lw.b, address, I64).ir, u.PTR)
    strides, acc = [], u.const_i64(1)
    for k in range(len(extents) - 1, -1, -1):
        strides.append(acc)
        acc = lw.b.mul(acc, extents[k]) if k else acc
    return BufRef(ptr, BufType(dtype.value, tuple(["?"] * len(extents))), tuple(extents),
                  tuple(reversed(strides)), f"view@{node.lineno}")


def select_call(lw, node: ast.Call) -> Val:
    cond, a, c = lw.args(node, 3)
    cond = lw.value(cond, node.args[0])
    a, c = lw.value(a, node.args[1]), lw.value(c, node.args[2])
    if a.ty != c.ty:
        from .arith import common

        a, c, _ = common(lw.b, a, c, arith=False)
    t = convert(lw.b, cond, BOOL)
    return Val(lw.b.select(t.ir, a.ir, c.ir), a.ty, a.weak and c.weak)


# -- helpers ------------------------------------------------------------------------
def inline_call(lw, fn, node: ast.Call):
    """Lower ``fn``'s body in place, its parameters bound to the arguments."""
    from .names import assigned_once

    if lw.inline_depth >= MAX_INLINE_DEPTH:
        lw.fail(node, f"helpers nested deeper than {MAX_INLINE_DEPTH} (recursion?)",
                "a loop")
    src = Source.of(fn)
    params = src.tree.args
    names = [a.arg for a in params.args]
    if params.vararg or params.kwarg or params.kwonlyargs or len(names) != len(node.args):
        lw.fail(node, f"helper {fn.__name__} takes {len(names)} positional argument(s)")
    values = [lw.expr(a) for a in node.args]
    env = {}
    for name, value, arg in zip(names, values, node.args):
        if isinstance(value, Val):  # a copy: the helper may assign to its parameter
            slot = u.entry_alloca(lw.b, value.ty.ir, name)
            lw.b.store(value.ir, slot)
            value = Var(slot, value.ty, arg.lineno)
        env[name] = value
    frame = Frame(src, env, assigned_once(src.tree) - set(names),
                  exit=lw.fn.append_basic_block(f"{fn.__name__}.ret"), ret_slots=None)
    lw.frames.append(frame)
    lw.inline_depth += 1
    try:
        lw.body(src.tree.body)
        if not lw.dead:
            if frame.ret_slots:
                lw.fail(src.tree, f"helper {fn.__name__} can end without a return value")
            lw.b.branch(frame.exit)
    finally:
        lw.frames.pop()
        lw.inline_depth -= 1
    lw.b.position_at_end(frame.exit)
    lw.dead = False
    if not frame.ret_slots:
        return Const(None)
    loads = [Val(lw.b.load(s, typ=t.ir), t) for s, t in frame.ret_slots]
    return loads[0] if frame.ret_ty == "scalar" else tuple(loads)


def helper_return(lw, value, node) -> None:
    frame = lw.frame
    items = value if isinstance(value, tuple) else (
        tuple(Const(v) for v in value.value) if isinstance(value, Const)
        and isinstance(value.value, tuple) else None)
    shape = "tuple" if items is not None else "scalar"
    items = items if items is not None else ((value,) if value is not None else ())
    vals = [lw.value(v, node, vector=True) for v in items]
    if frame.ret_slots is None:
        frame.ret_ty = shape
        frame.ret_slots = [(u.entry_alloca(lw.b, v.ty.ir, "ret"), v.ty) for v in vals]
    if frame.ret_ty != shape or len(vals) != len(frame.ret_slots):
        lw.fail(node, "this return differs in shape from the helper's first return")
    for v, (slot, ty) in zip(vals, frame.ret_slots):
        lw.b.store(lw.coerce(v, ty, node, "returned value").ir, slot)
    lw.b.branch(frame.exit)
    lw.dead = True


def lower_call(lw, node: ast.Call):
    """A call: a cast, a builtin, a function of the language (`local`, `simd`, `kmath`, ...)
    or an ``@inline`` helper (lowered in place); anything else is an error saying why."""
    if node.keywords:
        lw.fail(node, "keyword arguments in kernel calls", "positional arguments")
    callee = lw.expr(node.func)
    fn = callee.value if isinstance(callee, Const) else None
    out = _language_call(lw, fn, node)
    if out is not _NOT_OURS:
        return out
    fn = getattr(fn, "py_func", fn)  # another @kernel: the decorated name is its Kernel
    if getattr(fn, "__cuvil_inline__", False) or hasattr(fn, "__cuvil_kernel__"):
        target = fn.__cuvil_kernel__.py_func if hasattr(fn, "__cuvil_kernel__") else fn
        return inline_call(lw, target, node)
    _refuse_call(lw, fn, node)


_NOT_OURS = object()  # (`_language_call`: ``fn`` is no function of the language)


def _language_call(lw, fn, node: ast.Call):
    """The call of ``fn`` when it is a cast, a builtin or a function of the language; else
    `_NOT_OURS`."""
    if isinstance(fn, Scalar):
        return cast(lw, fn, node)
    if fn in (int, float, bool):
        return cast(lw, {int: I64, float: F64, bool: BOOL}[fn], node, builtin=True)
    if fn in (min, max):
        return minmax(lw, fn is min, node)
    if fn is abs:
        return absolute(lw, node)
    if fn is len:
        return length(lw, node)
    if fn is local:
        return local_array(lw, node)
    if fn is view:
        return view_call(lw, node)
    if fn is address:
        (buf,) = lw.args(node, 1)
        if not isinstance(buf, BufRef):
            lw.fail(node, "address() of something that is not a buffer")
        lw.mark_written(buf)  # a view of that address may be written
        return Val(lw.b.ptrtoint(buf.ptr, u.I64), I64)
    if fn is select:
        return select_call(lw, node)
    return _library_call(lw, fn, node)


def _library_call(lw, fn, node: ast.Call):
    """The call of an atomic, `kmath` or `simd` function ``fn``; else `_NOT_OURS`."""
    if fn in ATOMICS:
        return atomic(lw, fn, node)
    if fn in kmath.FUNCTIONS:
        return math(lw, fn, node)
    if fn in kmath.INT_FUNCTIONS:
        return bit_count(lw, fn, node)
    if fn in simd.OPERATIONS:
        return simd_call(lw, fn, node)
    if fn in simd.VECTOR_OPERATIONS:
        return _VECTOR_CALLS[simd.VECTOR_OPERATIONS[fn]](lw, node)
    return _NOT_OURS



#: A `simd` vector operation (its name in `simd.VECTOR_OPERATIONS`) -> its lowering.
_VECTOR_CALLS = {
    "load": vec.v_load, "store": vec.v_store, "stream_store": vec.v_stream_store,
    "splat": vec.v_splat, "iota": vec.v_iota, "select": vec.v_select, "min": vec.v_min,
    "max": vec.v_max, "reduce_add": vec.v_reduce_add, "reduce_max": vec.v_reduce_max,
    "reduce_min": vec.v_reduce_min, "any": vec.v_any, "all": vec.v_all, "vector": lanes.v_vector,
    "insert": lanes.v_insert, "shuffle": lanes.v_shuffle, "slice": lanes.v_slice,
}


def _refuse_call(lw, fn, node: ast.Call) -> None:
    """Fail at a call of something a kernel cannot call, saying what to write instead."""
    if fn is range:
        lw.fail(node, "range() outside a for loop", "`for i in range(...)`")
    if fn is bits:
        lw.fail(node, "bits() outside a for loop", "`for bit in bits(word)`")
    if fn is prange:
        lw.fail(node, "prange() outside a for loop", "`for i in prange(n)`")
    if callable(fn):
        module = getattr(fn, "__module__", "") or ""
        hint = (kmath.suggest(getattr(fn, "__name__", ""))
                if module.startswith(("numpy", "math")) or module == "builtins"
                else "@inline on that function, so kernels may call it")
        lw.fail(node, f"`{ast.unparse(node.func)}` cannot be called from a kernel", hint)
    lw.fail(node, f"`{ast.unparse(node.func)}` is not callable")
