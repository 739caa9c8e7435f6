"""Lowering of the `simd` calls (see that module for what each one means)."""

from __future__ import annotations

import ast
import math

from llvmlite import ir

from .. import irutil as u
from . import simd
from .arith import convert
from .values import BufRef, Const


def simd_call(lw, fn, node: ast.Call):
    """A `simd` memory operation: a fence, a prefetch, or a fill or copy of ``n`` lanes
    (``stream_fill`` / ``stream_copy``: with non-temporal stores)."""
    op = simd.OPERATIONS[fn]
    if op == "fence":
        lw.args(node, 0)
        lw.b.fence("seq_cst")
        return Const(None)
    if op == "prefetch":
        return _prefetch(lw, node)
    if op.endswith("fill"):
        buf, at, vector, lanes = _fill_vector(lw, node)
    else:
        buf, at, vector, lanes = _copied_vector(lw, node)
    _store_lanes(lw, buf, at, vector, lanes, op.startswith("stream"), node)
    return Const(None)


def _prefetch(lw, node: ast.Call) -> Const:
    buf, at = lw.args(node, 2)
    ptr = lw.b.gep(buffer_arg(lw, buf, node), [index_of(lw, at, node.args[1])],
                   source_etype=buf.ty.dtype.ir)  # not inbounds: may lie past it
    name = "llvm.prefetch.p0"
    decl = lw.b.module.globals.get(name) or ir.Function(
        lw.b.module, ir.FunctionType(u.VOID, [u.PTR, u.I32, u.I32, u.I32]), name=name)
    lw.b.call(decl, [ptr, u.const_i32(1), u.const_i32(3), u.const_i32(1)])
    return Const(None)


def _fill_vector(lw, node: ast.Call) -> tuple:
    """``fill(buf, at, n, value)``: (buf, at, the value splat to n lanes, n)."""
    buf, at, n, value = lw.args(node, 4)
    buffer_arg(lw, buf, node)
    lanes = lane_count(lw, n, node.args[2])
    vty = u.vec(buf.ty.dtype.ir, lanes)
    scalar = convert(lw.b, lw.value(value, node.args[3], want=buf.ty.dtype.compute),
                     buf.ty.dtype).ir
    vector = lw.b.insert_element(ir.Constant(vty, ir.Undefined), scalar,
                                 u.const_i32(0))
    vector = lw.b.shuffle_vector(vector, ir.Constant(vty, ir.Undefined),
                                 ir.Constant(u.vec(u.I32, lanes), [0] * lanes))
    return buf, at, vector, lanes


def _copied_vector(lw, node: ast.Call) -> tuple:
    """``copy(buf, at, src, src_at, n)``: (buf, at, the n lanes loaded from src, n)."""
    buf, at, src, src_at, n = lw.args(node, 5)
    lanes = lane_count(lw, n, node.args[4])
    buffer_arg(lw, buf, node)
    buffer_arg(lw, src, node, "the third argument (the source)")
    vty = u.vec(src.ty.dtype.ir, lanes)
    if src.ty.dtype != buf.ty.dtype:
        lw.fail(node, f"copy from {src.ty.dtype} to {buf.ty.dtype}", "same types")
    src_index = index_of(lw, src_at, node.args[3])
    check_flat(lw, src, src_index, lanes, node)
    return buf, at, u.load_vec(lw.b, src.ptr, src_index, vty), lanes


def _store_lanes(lw, buf, at, vector: ir.Value, lanes: int, stream: bool, node) -> None:
    """Store ``vector`` at ``buf[at:at + lanes]`` (checked in debug builds)."""
    buffer_arg(lw, buf, node)
    lw.mark_written(buf)
    index = index_of(lw, at, node.args[1])
    check_flat(lw, buf, index, lanes, node)
    elem = buf.ty.dtype.ir
    size = max(1, elem.width // 8) if isinstance(elem, ir.IntType) else \
        (4 if elem == u.F32 else 8)
    # A streaming store is aligned like simd.stream_store's: x86 has no unaligned
    # non-temporal vector store, and LLVM splits an element-aligned one into `movntsd`s.
    align = min(64, (size * lanes) & -(size * lanes)) if stream else size
    ptr = u.gep(lw.b, buf.ptr, index, elem)
    if stream:
        stream_target(lw, buf, index, ptr, size, align, node)
    store = lw.b.store(vector, ptr, align=align)
    if stream:
        store.set_metadata("nontemporal", lw.b.module.add_metadata([u.const_i32(1)]))


def stream_target(lw, buf: BufRef, index: ir.Value, ptr: ir.Value, size: int,
                  align: int, node) -> None:
    """A non-temporal store of ``align`` bytes at element ``index`` of ``buf``: it faults
    (a segfault, vmovntps) unless the address is a multiple of ``align``. A constant index
    that breaks it is a compile error; a debug build checks every address; `kernel(...)`
    checks the array's own address (`streamed` records ``buf``'s largest ``align``)."""
    if isinstance(index, ir.Constant) and (index.constant * size) % align:
        lw.fail(node, f"a streaming store of {align} bytes at element {index.constant} "
                f"of '{buf.name}' ({index.constant * size} bytes in) is not "
                f"{align}-byte aligned", f"an element index that is a multiple of "
                f"{align // size}")
    if isinstance(buf.ptr, ir.Argument):
        lw.streamed[buf.ptr.name] = max(align, lw.streamed.get(buf.ptr.name, 1))
    if lw.debug:
        off = lw.b.and_(lw.b.ptrtoint(ptr, u.I64), u.const_i64(align - 1))
        what = f"stream_store alignment: address mod {align} of {buf.name}"
        lw.check_index(BufRef(None, None, (u.const_i64(1),), (), what), 0, off, node)


def buffer_arg(lw, buf, node, which: str = "the first argument") -> ir.Value:
    if not isinstance(buf, BufRef):
        lw.fail(node, f"{which} of a simd call must be a buffer",
                "a buffer parameter, a local() array or a view()")
    return buf.ptr


def lane_count(lw, n, node) -> int:
    if not (isinstance(n, Const) and isinstance(n.value, int) and 1 <= n.value <= 64):
        lw.fail(node, "the element count of a simd call must be a constant 1..64")
    return n.value


def index_of(lw, x, node) -> ir.Value:
    val = lw.value(x, node)
    if val.ty.is_float:
        lw.fail(node, "a flat index must be an int")
    return convert(lw.b, val, _i64()).ir


def check_flat(lw, buf: BufRef, index: ir.Value, lanes: int, node) -> None:
    """A constant ``index``: [index, index + lanes) inside the buffer, checked when
    compiling (a negative one always, a run past the end when the size is static); any
    index in a debug build (only ``index >= 0`` when the buffer's size is not known).
    The error names the run, since the extent it reports is the last valid start."""
    if isinstance(index, ir.Constant):
        sizes = [e.constant if isinstance(e, ir.Constant) else None for e in buf.extents]
        total = None if None in sizes else math.prod(sizes)
        if index.constant < 0 or (total is not None and index.constant + lanes > total):
            lw.fail(node, f"elements [{index.constant}, {index.constant + lanes}) out of "
                    f"range for '{buf.name}' ({'?' if total is None else total} "
                    f"elements)")
    if not lw.debug:
        return
    limit = None
    if all(e is not None for e in buf.extents):
        total = buf.extents[0]
        for e in buf.extents[1:]:
            total = lw.b.mul(total, e)
        limit = lw.b.sub(total, u.const_i64(lanes - 1))
    name = f"{buf.name} (the flat start of {lanes} elements)"
    flat = BufRef(buf.ptr, buf.ty, (limit,), (u.const_i64(1),), name)
    lw.check_index(flat, 0, index, node)


def _i64():
    from .types import I64

    return I64
