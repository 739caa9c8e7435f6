"""Lowering of the `simd` calls (see that module for what each one means)."""

from __future__ import annotations

import ast
import math

from llvmlite import ir

from .. import irutil as u
from . import simd
from .arith import convert
from .values import BufRef, Const


class SimdMixin:
    """`simd.*` calls for `lower.Lowerer`."""

    def simd_call(self, fn, node: ast.Call):
        op = simd.OPERATIONS[fn]
        if op == "fence":
            self.args(node, 0)
            self.b.fence("seq_cst")
            return Const(None)
        if op == "prefetch":
            buf, at = self.args(node, 2)
            ptr = self.b.gep(self.buffer_arg(buf, node), [self.index_of(at, node.args[1])],
                             source_etype=buf.ty.dtype.ir)  # not inbounds: may lie past it
            name = "llvm.prefetch.p0"
            decl = self.b.module.globals.get(name) or ir.Function(
                self.b.module, ir.FunctionType(u.VOID, [u.PTR, u.I32, u.I32, u.I32]), name=name)
            self.b.call(decl, [ptr, u.const_i32(1), u.const_i32(3), u.const_i32(1)])
            return Const(None)
        stream = op.startswith("stream")
        if op.endswith("fill"):
            buf, at, n, value = self.args(node, 4)
            self.buffer_arg(buf, node)
            lanes = self.lanes(n, node.args[2])
            vty = u.vec(buf.ty.dtype.ir, lanes)
            scalar = convert(self.b, self.value(value, node.args[3], want=buf.ty.dtype.compute),
                             buf.ty.dtype).ir
            vector = self.b.insert_element(ir.Constant(vty, ir.Undefined), scalar,
                                           u.const_i32(0))
            vector = self.b.shuffle_vector(vector, ir.Constant(vty, ir.Undefined),
                                           ir.Constant(u.vec(u.I32, lanes), [0] * lanes))
        else:
            buf, at, src, src_at, n = self.args(node, 5)
            lanes = self.lanes(n, node.args[4])
            self.buffer_arg(buf, node)
            self.buffer_arg(src, node, "the third argument (the source)")
            vty = u.vec(src.ty.dtype.ir, lanes)
            if src.ty.dtype != buf.ty.dtype:
                self.fail(node, f"copy from {src.ty.dtype} to {buf.ty.dtype}", "same types")
            src_index = self.index_of(src_at, node.args[3])
            self.check_flat(src, src_index, lanes, node)
            vector = u.load_vec(self.b, src.ptr, src_index, vty)
        self.buffer_arg(buf, node)
        self.mark_written(buf)
        index = self.index_of(at, node.args[1])
        self.check_flat(buf, index, lanes, node)
        elem = buf.ty.dtype.ir
        size = max(1, elem.width // 8) if isinstance(elem, ir.IntType) else \
            (4 if elem == u.F32 else 8)
        # A streaming store is aligned like simd.stream_store's: x86 has no unaligned
        # non-temporal vector store, and LLVM splits an element-aligned one into `movntsd`s.
        align = min(64, (size * lanes) & -(size * lanes)) if stream else size
        ptr = u.gep(self.b, buf.ptr, index, elem)
        if stream:
            self.stream_target(buf, index, ptr, size, align, node)
        store = self.b.store(vector, ptr, align=align)
        if stream:
            store.set_metadata("nontemporal", self.b.module.add_metadata([u.const_i32(1)]))
        return Const(None)

    def stream_target(self, buf: BufRef, index: ir.Value, ptr: ir.Value, size: int,
                      align: int, node) -> None:
        """A non-temporal store of ``align`` bytes at element ``index`` of ``buf``: it faults
        (a segfault, vmovntps) unless the address is a multiple of ``align``. A constant index
        that breaks it is a compile error; a debug build checks every address; `kernel(...)`
        checks the array's own address (`streamed` records ``buf``'s largest ``align``)."""
        if isinstance(index, ir.Constant) and (index.constant * size) % align:
            self.fail(node, f"a streaming store of {align} bytes at element {index.constant} "
                      f"of '{buf.name}' ({index.constant * size} bytes in) is not "
                      f"{align}-byte aligned", f"an element index that is a multiple of "
                      f"{align // size}")
        if isinstance(buf.ptr, ir.Argument):
            self.streamed[buf.ptr.name] = max(align, self.streamed.get(buf.ptr.name, 1))
        if self.debug:
            off = self.b.and_(self.b.ptrtoint(ptr, u.I64), u.const_i64(align - 1))
            what = f"stream_store alignment: address mod {align} of {buf.name}"
            self.check_index(BufRef(None, None, (u.const_i64(1),), (), what), 0, off, node)

    def buffer_arg(self, buf, node, which: str = "the first argument") -> ir.Value:
        if not isinstance(buf, BufRef):
            self.fail(node, f"{which} of a simd call must be a buffer",
                      "a buffer parameter, a local() array or a view()")
        return buf.ptr

    def lanes(self, n, node) -> int:
        if not (isinstance(n, Const) and isinstance(n.value, int) and 1 <= n.value <= 64):
            self.fail(node, "the element count of a simd call must be a constant 1..64")
        return n.value

    def index_of(self, x, node) -> ir.Value:
        val = self.value(x, node)
        if val.ty.is_float:
            self.fail(node, "a flat index must be an int")
        return convert(self.b, val, _i64()).ir

    def check_flat(self, buf: BufRef, index: ir.Value, lanes: int, node) -> None:
        """A constant ``index``: [index, index + lanes) inside the buffer, checked when
        compiling (a negative one always, a run past the end when the size is static); any
        index in a debug build (only ``index >= 0`` when the buffer's size is not known).
        The error names the run, since the extent it reports is the last valid start."""
        if isinstance(index, ir.Constant):
            sizes = [e.constant if isinstance(e, ir.Constant) else None for e in buf.extents]
            total = None if None in sizes else math.prod(sizes)
            if index.constant < 0 or (total is not None and index.constant + lanes > total):
                self.fail(node, f"elements [{index.constant}, {index.constant + lanes}) out of "
                          f"range for '{buf.name}' ({'?' if total is None else total} "
                          f"elements)")
        if not self.debug:
            return
        limit = None
        if all(e is not None for e in buf.extents):
            total = buf.extents[0]
            for e in buf.extents[1:]:
                total = self.b.mul(total, e)
            limit = self.b.sub(total, u.const_i64(lanes - 1))
        name = f"{buf.name} (the flat start of {lanes} elements)"
        flat = BufRef(buf.ptr, buf.ty, (limit,), (u.const_i64(1),), name)
        self.check_index(flat, 0, index, node)


def _i64():
    from .types import I64

    return I64
