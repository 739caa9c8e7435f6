"""A native entry for ``kernel(...)``: one LLVM-IR function per signature shape that CPython
calls directly (``METH_FASTCALL``), checks the arguments and calls the kernel with the GIL
released -- no ctypes argument conversion and no Python code per argument.

Why (AMD EPYC Zen 4 AVX-512 VNNI, shared 2 cores, `benchmarks/dispatch.py`): with four arrays
the Python entry (`dispatch.Entry.convert`) cost ~3.3 us of a ~5-6 us call -- type, dtype,
shape and flag checks, ~0.2 us to read each array's pointer and flags through ctypes, the
overlap check -- and the ``CFUNCTYPE`` call ~0.5 us more to convert its four ints. Here the
same checks are a few loads and compares each, the call one indirect call.

Shape (the trampoline's static values, so its object is disk-cached like any kernel's): the
argument kinds (``buf<rank>``, ``i32 i64 f32 f64``), the return kind, ``noalias`` and the
object-layout offsets (checked once per process on probe objects, `layout`). Everything that
differs between kernels of one shape or between processes (the kernel's address, dtype and
type objects, C-API functions, expected extents) is in the *plan*: int64 words in a ``bytes``
object passed as the function's ``self``:

    header: kernel, PyEval_SaveThread, PyEval_RestoreThread, miss marker, None, ndarray type,
            int type, float type, PyLong_AsLongLongAndOverflow, PyLong_FromLongLong,
            PyFloat_FromDouble, Py_IncRef
    per argument (ARG words): a buffer's dtype object, itemsize, alignment mask, the flags it
            must have (C-contiguous, writeable unless the kernel is known not to write it)
            or a scalar's low and high bounds (at 3 and 4), then MAX_RANK extents (>= 0:
            that value; -1: any; -2 - j: the int scalar argument j)

It accepts only the plainly valid: exactly ``np.ndarray`` (no subclass) of the very dtype
object, rank and extents, C-contiguous, writeable (a read-only array once the entry knows the
kernel does not write that buffer), aligned for streaming stores, pairwise disjoint for a
``noalias`` kernel; exactly ``int`` in range for an int, exactly ``float`` or an ``int`` within
int64 for a float. Anything else returns the miss marker and the caller goes on to the Python
entry and then the full path, which raise what they always raised. So the checks are those of
the full path, never weaker.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from llvmlite import ir

from .. import irutil as u

MAX_RANK = 8
HEAD = 12
ARG = 5 + MAX_RANK
(_FN, _SAVE, _RESTORE, _MISS, _NONE, _ARRAY, _LONG, _FLOAT, _AS_LONG, _FROM_LONG, _FROM_DOUBLE,
 _INCREF) = range(HEAD)
_C_CONTIGUOUS, _WRITEABLE = 0x1, 0x400
_IR = {"i32": u.I32, "i64": u.I64, "f32": u.F32, "f64": u.F64}


def layout(array_offset: int | None, fields: dict) -> dict | None:
    """The object-layout offsets the trampoline reads (bytes): ``type`` (``ob_type``),
    ``plan`` (a bytes object's data), ``fval`` (a float's value), ``array`` (numpy's fields
    after the header, checked by `dispatch._fields_reader`; ``fields``: their offsets within);
    None when a probe disagrees (another build of Python: the Python entry is used)."""
    if array_offset is None or sys.implementation.name != "cpython":
        return None
    tp = ctypes.sizeof(ctypes.c_ssize_t)
    plan = bytes.__basicsize__ - 1
    fval = float.__basicsize__ - ctypes.sizeof(ctypes.c_double)
    probe = b"cuvil"
    for obj in (1.5, probe, np.zeros(1), 7):
        if ctypes.c_void_p.from_address(id(obj) + tp).value != id(type(obj)):
            return None
    if ctypes.string_at(id(probe) + plan, len(probe)) != probe \
            or ctypes.c_double.from_address(id(2.25) + fval).value != 2.25:
        return None
    return {"type": tp, "plan": plan, "fval": fval, "array": array_offset, **fields}


def build(module: ir.Module, fn_name: str, *, kinds: list, ret: str | None, noalias: bool,
          offsets: dict) -> None:
    """Define ``ptr fn_name(ptr self, ptr args, i64 nargs)`` for arguments of ``kinds``."""
    fn = ir.Function(module, ir.FunctionType(u.PTR, [u.PTR, u.PTR, u.I64]), fn_name)
    gen = _Gen(fn, offsets)
    _, argv, nargs = fn.args
    b = gen.b
    gen.check(b.icmp_signed("==", nargs, u.const_i64(len(kinds))))
    objs = [b.load(b.gep(argv, [u.const_i64(i)], source_etype=u.PTR), typ=u.PTR)
            for i in range(len(kinds))]
    slots = {}
    for i, kind in enumerate(kinds):
        if not kind.startswith("buf"):
            slots[i] = gen.scalar(objs[i], i, kind)
    spans, values = [], dict(slots)
    for i, kind in enumerate(kinds):
        if kind.startswith("buf"):
            values[i], span = gen.buffer(objs[i], i, int(kind[3:]), slots)
            spans.append(span)
    if noalias:
        gen.disjoint(spans)
    call_args = [values[i][1] if not kinds[i].startswith("buf") else values[i]
                 for i in range(len(kinds))]
    gen.call(call_args, [u.PTR if k.startswith("buf") else _IR[k] for k in kinds], ret)


class _Gen:
    """The builder and the plan of one trampoline; `check` branches to the miss block."""

    def __init__(self, fn: ir.Function, offsets: dict):
        self.fn, self.off = fn, offsets
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.plan = self.b.gep(fn.args[0], [u.const_i64(offsets["plan"])],
                               source_etype=ir.IntType(8))
        self.miss = fn.append_basic_block("miss")
        mb = ir.IRBuilder(self.miss)
        marker = self._word_at(mb, _MISS, u.PTR)
        self._incref(mb, marker)
        mb.ret(marker)

    def _word_at(self, b, index: int, typ=u.I64):
        return b.load(b.gep(self.plan, [u.const_i64(8 * index)], source_etype=ir.IntType(8)),
                      typ=typ)

    def word(self, index: int, typ=u.I64):
        return self._word_at(self.b, index, typ)

    def arg_word(self, arg: int, field: int):
        return self.word(HEAD + ARG * arg + field)

    def _incref(self, b, obj) -> None:
        fnty = ir.FunctionType(u.VOID, [u.PTR])
        b.call(b.inttoptr(self._word_at(b, _INCREF), fnty.as_pointer()), [obj])

    def field(self, obj, offset: int, typ):
        return self.b.load(self.b.gep(obj, [u.const_i64(offset)], source_etype=ir.IntType(8)),
                           typ=typ)

    def check(self, ok) -> None:
        """Go on when ``ok`` (i1) holds, else to the miss block."""
        go = self.fn.append_basic_block()
        self.b.cbranch(ok, go, self.miss)
        self.b.position_at_end(go)

    def is_type(self, obj, word: int):
        tp = self.b.ptrtoint(self.field(obj, self.off["type"], u.PTR), u.I64)
        self.check(self.b.icmp_unsigned("==", tp, self.word(word)))

    def scalar(self, obj, i: int, kind: str):
        """(i64 value for extents, the argument as ``kind``) of scalar argument ``i``: an int
        for an int in range; a float, or an int within int64 (converted as ``float(v)``
        does, then to f32 as ctypes does), for a float."""
        b = self.b
        if kind.startswith("i"):
            self.is_type(obj, _LONG)
            value = self._as_long(obj, i)
            self.check(b.and_(b.icmp_signed(">=", value, self.arg_word(i, 3)),
                              b.icmp_signed("<=", value, self.arg_word(i, 4))))
            return value, (b.trunc(value, u.I32) if kind == "i32" else value)
        slot = u.entry_alloca(b, u.F64, f"float{i}")
        tp = b.ptrtoint(self.field(obj, self.off["type"], u.PTR), u.I64)
        from_float, from_int, done = (self.fn.append_basic_block() for _ in range(3))
        b.cbranch(b.icmp_unsigned("==", tp, self.word(_FLOAT)), from_float, from_int)
        b.position_at_end(from_float)
        b.store(self.field(obj, self.off["fval"], u.F64), slot)
        b.branch(done)
        b.position_at_end(from_int)
        self.check(b.icmp_unsigned("==", tp, self.word(_LONG)))
        b.store(b.sitofp(self._as_long(obj, i), u.F64), slot)
        b.branch(done)
        b.position_at_end(done)
        value = b.load(slot, typ=u.F64)
        return u.const_i64(0), (b.fptrunc(value, u.F32) if kind == "f32" else value)

    def _as_long(self, obj, i: int):
        """An exact int's value as i64; a miss when it does not fit."""
        b = self.b
        overflow = u.entry_alloca(b, u.I32, f"overflow{i}")
        b.store(ir.Constant(u.I32, 0), overflow)
        fnty = ir.FunctionType(u.I64, [u.PTR, u.PTR])
        value = b.call(b.inttoptr(self.word(_AS_LONG), fnty.as_pointer()), [obj, overflow])
        self.check(b.icmp_signed("==", b.load(overflow, typ=u.I32), ir.Constant(u.I32, 0)))
        return value

    def buffer(self, obj, i: int, rank: int, slots: dict):
        """(data pointer, (start, end) as i64) of buffer argument ``i`` of ``rank`` axes."""
        b, base = self.b, self.off["array"]
        self.is_type(obj, _ARRAY)
        descr = b.ptrtoint(self.field(obj, base + self.off["descr"], u.PTR), u.I64)
        self.check(b.icmp_unsigned("==", descr, self.arg_word(i, 0)))
        nd = self.field(obj, base + self.off["nd"], u.I32)
        self.check(b.icmp_signed("==", nd, ir.Constant(u.I32, rank)))
        flags = b.sext(self.field(obj, base + self.off["flags"], u.I32), u.I64)
        need = self.arg_word(i, 3)  # C-contiguous, and writeable unless known read only
        self.check(b.icmp_unsigned("==", b.and_(flags, need), need))
        dims = self.field(obj, base + self.off["dimensions"], u.PTR)
        size = self.arg_word(i, 1)
        for d in range(rank):
            extent = b.load(b.gep(dims, [u.const_i64(d)], source_etype=u.I64), typ=u.I64)
            size = b.mul(size, extent)
            self.check(self._extent_ok(extent, self.arg_word(i, 5 + d), slots))
        data = self.field(obj, base + self.off["data"], u.PTR)
        start = b.ptrtoint(data, u.I64)
        self.check(b.icmp_unsigned("==", b.and_(start, self.arg_word(i, 2)), u.const_i64(0)))
        return data, (start, b.add(start, size))

    def _extent_ok(self, extent, want, slots: dict):
        """``want`` -1 (any), a value, or -2 - j (the int scalar argument j's value)."""
        b = self.b
        ok = b.or_(b.icmp_signed("==", want, u.const_i64(-1)),
                   b.icmp_signed("==", extent, want))
        for j, (value, _) in slots.items():
            ok = b.or_(ok, b.and_(b.icmp_signed("==", want, u.const_i64(-2 - j)),
                                  b.icmp_signed("==", extent, value)))
        return ok

    def disjoint(self, spans: list) -> None:
        """Miss when two non-empty ``[start, end)`` ranges overlap."""
        b = self.b
        for k, (s1, e1) in enumerate(spans):
            for s2, e2 in spans[:k]:
                hit = b.and_(b.and_(b.icmp_unsigned("<", s1, e2), b.icmp_unsigned("<", s2, e1)),
                             b.and_(b.icmp_unsigned("<", s1, e1), b.icmp_unsigned("<", s2, e2)))
                self.check(b.not_(hit))

    def call(self, args: list, types: list, ret: str | None) -> None:
        """Release the GIL, call the kernel, take the GIL back, return its result."""
        b = self.b
        save = b.inttoptr(self.word(_SAVE), ir.FunctionType(u.PTR, []).as_pointer())
        restore = b.inttoptr(self.word(_RESTORE), ir.FunctionType(u.VOID, [u.PTR]).as_pointer())
        kty = ir.FunctionType(_IR[ret] if ret else u.VOID, types)
        state = b.call(save, [])
        out = b.call(b.inttoptr(self.word(_FN), kty.as_pointer()), args)
        b.call(restore, [state])
        if ret is None:
            none = self.word(_NONE, u.PTR)
            self._incref(b, none)
            b.ret(none)
        elif ret.startswith("i"):
            box = ir.FunctionType(u.PTR, [u.I64])
            value = b.sext(out, u.I64) if ret == "i32" else out
            b.ret(b.call(b.inttoptr(self.word(_FROM_LONG), box.as_pointer()), [value]))
        else:
            box = ir.FunctionType(u.PTR, [u.F64])
            value = b.fpext(out, u.F64) if ret == "f32" else out
            b.ret(b.call(b.inttoptr(self.word(_FROM_DOUBLE), box.as_pointer()), [value]))


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80
_METHODS: list = []  # every method definition made, for the life of the process (as engines)
_new_function = None


def _c_api() -> list[int]:
    """Addresses of the C-API functions and objects of the plan header (after the kernel)."""
    api = ctypes.pythonapi
    names = ("PyEval_SaveThread", "PyEval_RestoreThread")
    funcs = ("PyLong_AsLongLongAndOverflow", "PyLong_FromLongLong", "PyFloat_FromDouble",
             "Py_IncRef")
    address = [ctypes.cast(getattr(api, n), ctypes.c_void_p).value for n in names]
    return address + [None, id(None), id(np.ndarray), id(int), id(float)] + \
        [ctypes.cast(getattr(api, n), ctypes.c_void_p).value for n in funcs]


def spec_for(kinds: tuple, buffers: tuple, ret: str | None, noalias: bool, offsets: dict):
    """The `KernelSpec` of the trampoline for a kernel of argument ``kinds`` (the spec's) with
    ``buffers`` (`dispatch.Entry`'s), or None when a buffer has more than ``MAX_RANK`` axes."""
    from ..spec import KernelSpec

    shape = list(kinds)
    for i, _, _, rank, _, _, _ in buffers:
        if rank > MAX_RANK:
            return None
        shape[i] = f"buf{rank}"
    return KernelSpec(name="cuvil.trampoline", build=build, args=("ptr", "ptr", "i64"),
                      ret="ptr", static={"kinds": shape, "ret": ret, "offsets": offsets,
                                         "noalias": noalias and len(buffers) > 1})


def bind(tramp, fn, count: int, buffers: tuple, scalars: tuple, miss,
         read_only: frozenset = frozenset()) -> tuple:
    """(a builtin-function object calling the kernel callable ``fn``, a release build's
    ``CFUNCTYPE``, through the loaded trampoline ``tramp``; what must outlive it).
    ``buffers``, ``scalars``: `dispatch.Entry`'s; ``miss``: the marker to return;
    ``read_only``: names of buffers the kernel is known not to write (they may be read-only
    arrays; until the kernel is lowered to know, `dispatch.Entry.written`, every buffer must
    be writeable)."""
    global _new_function
    words = [0] * (HEAD + ARG * count)
    for i, pname, dtype, rank, dims, _, align in buffers:
        at = HEAD + ARG * i
        need = _C_CONTIGUOUS if pname in read_only else _C_CONTIGUOUS | _WRITEABLE
        words[at:at + 4] = [id(dtype), dtype.itemsize, align - 1, need]
        for d, dim in enumerate(dims):
            words[at + 5 + d] = -1 if dim is None else dim if type(dim) is int else -2 - dim[1]
    for i, _, low, high in scalars:
        words[HEAD + ARG * i + 3:HEAD + ARG * i + 5] = [low, high]
    header = [fn.address] + _c_api()
    header[_MISS] = id(miss)
    words[:HEAD] = header
    plan = np.array([w - (1 << 64) if w >= 1 << 63 else w for w in words], np.int64).tobytes()
    method = _MethodDef(b"kernel_entry", tramp.address, _METH_FASTCALL, None)
    if _new_function is None:
        _new_function = ctypes.pythonapi.PyCFunction_NewEx
        _new_function.restype = ctypes.py_object
        _new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    native = _new_function(ctypes.addressof(method), plan, None)
    _METHODS.append(method)  # (``native`` points at it: kept while any caller may hold it)
    return native, (method, tramp, fn)  # (the plan is ``native``'s self: it keeps it)
