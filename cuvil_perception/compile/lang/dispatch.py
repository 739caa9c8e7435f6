"""The fast path of ``kernel(...)``: one `Entry` per (static values, debug switch, current
module constants), built at the first fully checked call; later calls go through the entry's
native trampoline (`trampoline`), which checks the arguments and calls the kernel in compiled
code, and when it declines, through the entry's Python checks (`Entry.convert`), and when
those decline, through the full path again.

A full call (`Kernel._call_checked`) builds the spec, hashes its identity, looks the callable
up, resolves every buffer's dtype and extents and converts addresses through ``arr.ctypes``
(12-20 us for an empty kernel, 55-170 us with four arrays; AMD EPYC Zen 4 AVX-512 VNNI,
shared and noisy; `benchmarks/dispatch.py`). An entry keeps the callable and, per argument,
what to compare: the exact numpy type, the dtype object (``is``: numpy's native-order
built-in dtypes are singletons), C-contiguity, the shape (static extents resolved; an extent
naming a scalar parameter read from this call), writeability when the kernel writes the
buffer, the address's alignment for streaming stores, and overlap for a ``noalias`` kernel.
Anything it does not accept as plainly valid (a read-only array, a numpy scalar, a bool for
an int, overlapping buffers, a non-native dtype) is a miss: the caller takes the full path,
which raises exactly what it always raised, or runs. So the entry never refuses and never
accepts anything the full path would refuse.

Why a native trampoline, measured (same machine; four float32 arrays and a static extent):
the Python entry cost ~5 us a call, of which converting the arguments ~3.3 us (per array a
type, dtype, shape and flags check and ~0.2 us to read its pointer and flags through ctypes,
then the overlap check) and the ``CFUNCTYPE`` call ~0.5 us (ctypes converting four ints).
Reading ``__array_interface__`` (~1.6 us an array) or ``arr.ctypes.data`` (~1.2 us) is slower
still, and caching per array object is unsafe (an id is reused once an array is freed). In
the trampoline the same checks are a few loads and compares and the call one indirect call:
~0.1 us for the checks and the call together, leaving the Python frame of ``kernel(...)``
and its key (~1 us): four arrays ~1.5 us, an empty kernel ~0.9 us. It needs no C compiler
(LLVM IR, compiled and disk-cached like a kernel, `trampoline`) and releases the GIL around
the kernel as ctypes does. It declines what needs converting (an int for a float, a read-only
array, a subclass), which the Python entry then takes as before. Prewarm does not build
trampolines (9 of them took a pipeline's prewarm from ~9 to 15-28 ms of CPU, for ops that call
their kernels with addresses): the first ``kernel(...)`` builds its own.

A buffer's address and flags are read from the array object itself (``PyArrayObject``'s data
pointer and flags, right after the object header): ~0.2 us against ~1 us for
``arr.ctypes.data`` and ~0.15 us for ``arr.flags``; the layout is checked once per process
against ``arr.ctypes`` and ``arr.flags`` on probe arrays and, if it does not match (another
Python build), those are used and there is no native trampoline.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from ... import config
from ..registry import acquire_all, get_kernel
from ...errors import KernelSourceError
from . import trampoline
from .constants import current
from .types import BufType, resolve_dtype

#: the marker `Entry.convert` returns when the full path must decide.
MISS = object()

_EXACT = frozenset({int, str, bool, type(None)})  # equal values of one type: equal JSON
ndarray = np.ndarray
_C_CONTIGUOUS, _WRITEABLE = 0x1, 0x400  # NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE


class _Fields(ctypes.Structure):
    """The head of numpy's ``PyArrayObject_fields`` after the object header."""

    _fields_ = [("data", ctypes.c_void_p), ("nd", ctypes.c_int),
                ("dimensions", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("base", ctypes.c_void_p), ("descr", ctypes.c_void_p), ("flags", ctypes.c_int)]


def _fields_reader():
    """(``_Fields.from_address``, offset of the fields from ``id(arr)``) if ``id`` is the
    address and the fields are where numpy's headers put them (checked on arrays of several
    kinds: a view, an empty one, a read-only one, a non-contiguous one); else (None, 0)."""
    if sys.implementation.name != "cpython":
        return None, 0
    offset = object.__basicsize__  # sizeof(PyObject): the fields follow the header
    ro = np.zeros(4, np.float64)
    ro.flags.writeable = False
    probes = [np.zeros(3, np.float32), np.arange(5, dtype=np.int64)[1:], np.empty(0, np.uint8),
              ro, np.zeros((4, 4), np.int16)[:, ::2]]
    for p in probes:
        f = _Fields.from_address(id(p) + offset)
        if ((f.data or 0) != p.ctypes.data or f.nd != p.ndim
                or bool(f.flags & _C_CONTIGUOUS) != p.flags.c_contiguous
                or bool(f.flags & _WRITEABLE) != p.flags.writeable):
            return None, 0
    return _Fields.from_address, offset


_READ, _OFFSET = _fields_reader()
_LAYOUT = trampoline.layout(_OFFSET if _READ is not None else None,
                            {name: getattr(_Fields, name).offset
                             for name in ("data", "nd", "dimensions", "descr", "flags")})


def static_key(static: dict) -> tuple:
    """A hashable key of the static keywords of one call: the values with their types (``1``,
    ``1.0`` and ``True`` are different specs); floats, numpy scalars and containers (a list
    too) by their repr (``-0.0`` is not ``0.0``, ``(True,)`` not ``(1,)``)."""
    if not static:
        return ()
    if len(static) == 1:  # (the common case, ~2x cheaper: this runs on every call)
        (name, value), = static.items()
        if type(value) in _EXACT:
            return name, value, type(value)
    kinds = tuple(map(type, static.values()))
    if _EXACT.issuperset(kinds):
        return tuple(static.items()), kinds
    return tuple((k, type(v), v if type(v) in _EXACT else repr(v)) for k, v in static.items())


def call_key(kernel, static: dict) -> tuple | None:
    """The key of a ``kernel(...)`` call: its static values, the debug switch and the current
    values of the module constants the kernel reads (a change recompiles, `constants`);
    hashable (`static_key` and `constants.current` make every part so), or None when a value
    cannot be keyed."""
    try:
        refs = kernel._refs
        return (static_key(static), config.kernel_debug(), current(refs) if refs else ())
    except TypeError:
        return None


def bind_extents(kernel, args: tuple, static: dict) -> dict:
    """``static`` with each static parameter that has no default, is not given, and names an
    extent of a buffer (``Buf[f32, "n", 4]`` and ``*, n: int``) taken from the array passed for
    the first such buffer (when it is an array of the buffer's rank; else the call reports the
    missing value as before). Other buffers naming it are then checked against it."""
    plan = kernel._extents_from
    if plan is None:
        runtime, statics, _ = kernel.params()
        defaults, found = kernel._defaults(), []
        for name in statics:
            where = next(((i, ty.dims.index(name), ty.rank) for i, (_, ty) in enumerate(runtime)
                          if isinstance(ty, BufType) and name in ty.dims), None)
            if where is not None and name not in defaults:
                found.append((name, *where))
        kernel._extents_from = plan = tuple(found)
    for name, i, axis, rank in plan:
        if name not in static and i < len(args):
            a = args[i]
            if isinstance(a, ndarray) and a.ndim == rank:
                static = {**static, name: a.shape[axis]}
    return static


class Entry:
    """What one call signature resolved to; see the module docstring."""

    __slots__ = ("fn", "spec", "count", "buffers", "scalars", "noalias", "kernel", "_written",
                 "native", "_keep")

    def __init__(self, kernel, spec):
        """Load ``spec``'s callable (with its trampoline, in one engine: `_load`)."""
        runtime = kernel.params()[0]
        self.kernel, self.spec, self.count = kernel, spec, len(runtime)
        self.noalias = kernel.noalias
        self._written = None
        align = kernel.stream_alignment(spec)
        where = {p: i for i, (p, _) in enumerate(runtime)}
        buffers, scalars = [], []
        for i, (pname, ty) in enumerate(runtime):
            if isinstance(ty, BufType):
                ty = resolve_dtype(ty, spec.static)
                dims = tuple(d if d is None or isinstance(d, int)
                             else int(spec.static[d]) if d in spec.static else ("arg", where[d])
                             for d in ty.dims)
                fixed = dims if all(isinstance(d, int) for d in dims) else None
                buffers.append((i, pname, np.dtype(ty.dtype.dtype), len(dims), dims, fixed,
                                align.get(pname, 1)))
            elif ty.is_int:
                scalars.append((i, True, -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1))
            else:
                scalars.append((i, False, 0, 0))
        self.buffers, self.scalars = tuple(buffers), tuple(scalars)
        self.native, self._keep = _no_native, None
        self._load()

    def _load(self) -> None:
        """The kernel's callable and, unless it is a debug build (whose callable is a Python
        wrapper), a prange kernel or the layout is unknown, the native entry through its trampoline: both
        taken together (`registry.acquire_all`), so a warm start maps both objects into one
        engine (one target machine, one relocation pass: ~1-3 ms less)."""
        spec = self.spec
        tspec = None
        # a prange kernel's hidden thread-pool record is filled in by its callable
        # (`loader`), which the trampoline's direct call would bypass: it keeps that path
        if _LAYOUT is not None and spec.error_record is None and spec.threads is None:
            tspec = trampoline.spec_for(spec.args, self.buffers, spec.ret, self.noalias, _LAYOUT)
        if tspec is None:
            self.fn = get_kernel(spec)
            return
        try:
            self.fn, tramp = (found.kernel for found in acquire_all([spec, tspec]))
        except Exception:  # the kernel's own error is raised again here; a trampoline's is
            self.fn = get_kernel(spec)  # not the caller's: the Python entry serves alone
            return
        self.native, self._keep = trampoline.bind(tramp, self.fn, self.count, self.buffers,
                                                  self.scalars, MISS)

    def written(self) -> frozenset:
        """The buffers the kernel writes (lowered once, when a read-only array is first passed;
        the native entry is then rebuilt to take read-only arrays for the others)."""
        if self._written is None:
            self._written = self.kernel.written(self.spec)
            if self._keep is not None:
                read_only = frozenset(b[1] for b in self.buffers) - self._written
                self.native, self._keep = trampoline.bind(
                    self._keep[1], self.fn, self.count, self.buffers, self.scalars, MISS,
                    read_only)
        return self._written

    def call(self, args: tuple):
        """Run the kernel through the Python checks (`convert`), or return `MISS`."""
        raw = self.convert(args)
        return MISS if raw is MISS else self.fn(*raw)

    def convert(self, args: tuple):
        """The raw arguments for ``fn``, or `MISS` when the full path must decide."""
        if len(args) != self.count:
            return MISS
        raw = list(args)
        for i, is_int, low, high in self.scalars:
            v = args[i]
            if type(v) is float and not is_int:
                continue
            if type(v) is not int or (is_int and not low <= v <= high):
                return MISS
            raw[i] = v if is_int else float(v)
        spans = [] if self.noalias and len(self.buffers) > 1 else None
        for i, pname, dtype, rank, dims, fixed, align in self.buffers:
            a = args[i]
            if type(a) is not ndarray and not isinstance(a, ndarray) or a.dtype is not dtype:
                return MISS
            if fixed is not None:
                if a.shape != fixed:
                    return MISS
            elif a.ndim != rank or not _extents_match(a.shape, dims, raw):
                return MISS
            if _READ is not None:
                f = _READ(id(a) + _OFFSET)
                p, flags = f.data or 0, f.flags
                contiguous, writeable = flags & _C_CONTIGUOUS, flags & _WRITEABLE
            else:
                flags, p = a.flags, a.ctypes.data
                contiguous, writeable = flags.c_contiguous, flags.writeable
            if not contiguous or not writeable and pname in self.written():
                return MISS
            raw[i] = p
            if align != 1 and p % align:
                return MISS
            if spans is not None:
                spans.append((p, p + a.nbytes))
        if spans is not None:  # an overlap of non-empty ranges: the full path decides
            spans.sort()
            reach = 0
            for start, end in spans:
                if start < reach and start < end:
                    return MISS
                if end > reach:
                    reach = end
        return raw


def _no_native(*args):
    return MISS


def _extents_match(shape: tuple, dims: tuple, raw: list) -> bool:
    for s, d in zip(shape, dims):
        if d is None:
            continue
        want = raw[d[1]] if type(d) is tuple else d
        if s != want:
            return False
    return True



class Specialized:
    """``Kernel.specialize(**static)``: calls the kernel with ``static`` merged into each
    call's keywords (``k = fill.specialize(h=64)``, then ``k(img, w=2048)``); a name the
    kernel does not take is refused at once, a keyword given again per call."""

    def __init__(self, kernel, static: dict):
        statics = kernel.params()[1]
        unknown = sorted(set(static) - set(statics))
        if unknown:
            raise KernelSourceError(f"kernel {kernel.name}: specialize(): unknown static "
                                    f"parameters {unknown}; it takes {statics}")
        self.kernel, self.static = kernel, dict(static)

    def __call__(self, *args, **static):
        if not static:
            return self.kernel(*args, **self.static)
        again = sorted(set(static) & set(self.static))
        if again:
            raise TypeError(f"kernel {self.kernel.name}: {again} already bound by specialize()")
        return self.kernel(*args, **self.static, **static)

    def __repr__(self) -> str:
        return f"<kernel {self.kernel.name} specialized {self.static}>"
