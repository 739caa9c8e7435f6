"""Explicit SIMD vocabulary for what auto-vectorisation does not produce on its own:
``from cuvil_perception.compile.lang import simd, Vec``.

Indices are *flat* element indices into the buffer (row-major), ``n`` a compile-time int.

Memory operations on buffers:

==============================  =============================================================
call                            compiled as
==============================  =============================================================
``simd.fill(buf, at, n, v)``    one ``<n x T>`` store of ``v`` in every lane (16 f32 zeros =
                                one 64-byte store)
``simd.copy(dst, at, src,       one ``<n x T>`` load and one store (element-aligned, so any
from_, n)``                     numpy view is fine)
``simd.stream_fill(...)``,      the same with ``!nontemporal`` stores (whole cache lines
``simd.stream_copy(...)``       written without a read for ownership); end with ``fence()``.
                                The destination must be aligned to the vector's size up
                                to 64 bytes, as for ``stream_store`` (64 for 16 f32)
``simd.fence()``                a seq_cst fence (orders streaming stores before later loads)
``simd.prefetch(buf, at)``      ``llvm.prefetch`` for writing, all cache levels (a hint: the
                                address may lie past the buffer, it never faults)
==============================  =============================================================

Vector values (type ``Vec[T, n]``: T one of boolean, i32, i64, f32, f64; a ``boolean`` vector
is a *mask*). They live in registers, are immutable values, and take part in arithmetic:
``+ - *`` (and ``/`` on floats), ``& | ^ ~`` on ints and masks, unary ``-``, comparisons
``< <= > >= == !=`` (give a mask; ``!=`` is true on NaN lanes, as in Python), ``v[k]`` (one
lane; ``k`` a constant or a run-time int in ``[0, n)``), ``kmath`` functions lane-wise
(``kmath.fma(a, b, acc)``, ``sqrt``, ``exp``...), ``abs(v)`` and casts (``f32(v)``, ``i32(v)``:
each lane cast as the scalar cast does). The other operand of an operator may be a
scalar of the element type (or a literal): it is broadcast. Two vectors must agree in element
type and lane count; there are no implicit conversions.

==============================  =============================================================
call                            compiled as
==============================  =============================================================
``simd.load(buf, at, n)``       one ``<n x T>`` load of ``buf.flat[at:at + n]`` (element-
                                aligned); T is the buffer's type (f32 f64 i32 i64)
``simd.store(buf, at, v)``      one store of all lanes at ``buf.flat[at:]`` (element-aligned)
``simd.stream_store(buf, at,    a ``!nontemporal`` store aligned to the vector's size (the
v)``                            largest power of two dividing it, at most 64 bytes): the
                                address must be a multiple of it (a debug build checks; a
                                release build faults)
``simd.splat(x, n)``            ``x`` in every lane (the type of ``x``: ``f32(0.0)``)
``simd.iota(T, n)``             the constant ``(0, 1, ..., n - 1)`` of type ``Vec[T, n]``
``simd.insert(v, k, x)``        ``v`` with lane ``k`` replaced by ``x``
``simd.shuffle(v, lanes)``      ``(v[lanes[0]], v[lanes[1]], ...)``: ``lanes`` a static tuple
``simd.slice(v, start, n)``     lanes ``start .. start + n - 1`` as a vector (constants)
``simd.select(mask, a, b)``     lane-wise ``a if mask else b`` (a masked blend); ``mask`` may
                                be one bool for every lane (a branch-free ``a if c else b``)
``simd.min(a, b)``,             lane-wise ``b if b < a else a`` / ``b if b > a else a`` (the
``simd.max(a, b)``              scalar min/max: NaN in ``a`` stays, in ``b`` is skipped)
``simd.reduce_add(v)``,         the lanes combined pairwise, halves first: ``v[:h] op v[h:]``
``simd.reduce_max(v)``,         (the upper half padded with the identity when n is odd) until
``simd.reduce_min(v)``          one lane is left - a fixed order, so the result is the same
                                bits compiled and uncompiled
``simd.any(mask)``,             whether any / every lane of a mask is set
``simd.all(mask)``
==============================  =============================================================

Uncompiled (``kernel.py_func``), each is the numpy operation it stands for (``prefetch``/
``fence`` do nothing) and a vector is a `Vector`, a 1-d array with value semantics; a scalar
operand has the type it is compiled as (`lane`: a ``u8`` buffer element is an i32). A
bounds-checked build checks ``[at, at + n)`` against the buffer's size when it is known, and a
run-time lane index against ``[0, n)``.
"""

from __future__ import annotations

import builtins

import numpy as np


def fill(buf: np.ndarray, at: int, n: int, value) -> None:
    flat, at = _flat(buf, at, n, "fill")  # a slice would clamp: the compiled code does not
    flat[at:at + n] = value


def copy(dst: np.ndarray, at: int, src: np.ndarray, from_: int, n: int) -> None:
    flat, at = _flat(dst, at, n, "copy")
    source, from_ = _flat(src, from_, n, "copy")
    flat[at:at + n] = source[from_:from_ + n]


def stream_fill(buf: np.ndarray, at: int, n: int, value) -> None:
    _stream_aligned(buf, at, n, "stream_fill")
    fill(buf, at, n, value)


def stream_copy(dst: np.ndarray, at: int, src: np.ndarray, from_: int, n: int) -> None:
    _stream_aligned(dst, at, n, "stream_copy")
    copy(dst, at, src, from_, n)


def fence() -> None:
    """Nothing to order in plain Python."""


def prefetch(buf: np.ndarray, at: int) -> None:
    """A hint only."""


# -- vector values (uncompiled) ---------------------------------------------------------------
class Vector(np.ndarray):
    """A vector value in an uncompiled kernel: a 1-d array whose in-place operators make a new
    vector (``acc += w`` never changes another name bound to the old one, as compiled) and
    whose lanes cannot be assigned (``simd.insert`` makes the changed copy)."""

    def __setitem__(self, key, value):
        raise TypeError("vectors are values: write `v = simd.insert(v, k, x)` instead of "
                        "`v[k] = x`")

    def __iadd__(self, other):
        return self + other

    def __isub__(self, other):
        return self - other

    def __imul__(self, other):
        return self * other

    def __itruediv__(self, other):
        return self / other

    def __iand__(self, other):
        return self & other

    def __ior__(self, other):
        return self | other

    def __ixor__(self, other):
        return self ^ other


def _vector(values) -> Vector:
    return np.array(values, copy=True).view(Vector)


def _flat(buf: np.ndarray, at, n: int, what: str) -> tuple[np.ndarray, int]:
    flat, at = buf.reshape(-1), int(at)
    if at < 0 or at + n > flat.size:
        raise IndexError(f"simd.{what}: elements [{at}, {at + n}) out of range for a buffer "
                         f"of {flat.size}")
    return flat, at


def load(buf: np.ndarray, at: int, n: int) -> Vector:
    flat, at = _flat(buf, at, n, "load")
    return _vector(flat[at:at + n])


def store(buf: np.ndarray, at: int, v) -> None:
    flat, at = _flat(buf, at, len(v), "store")
    flat[at:at + len(v)] = np.asarray(v)


def stream_store(buf: np.ndarray, at: int, v) -> None:
    flat, at = _stream_aligned(buf, at, len(v), "stream_store")
    flat[at:at + len(v)] = np.asarray(v)


def _stream_aligned(buf: np.ndarray, at, n: int, what: str) -> tuple[np.ndarray, int]:
    """`_flat`, and a ValueError unless element ``at`` lies at a multiple of the streaming
    store's alignment (n elements' bytes, the largest power of two dividing it, at most 64):
    compiled, a misaligned non-temporal store faults (``vmovntps``), it raises nothing."""
    flat, at = _flat(buf, at, n, what)
    size = n * flat.itemsize
    align = builtins.min(64, size & -size)  # (`min` here is simd.min)
    address = flat.ctypes.data + at * flat.itemsize
    if address % align:
        raise ValueError(f"simd.{what}: element {at} (address mod {align} = "
                         f"{address % align}) is not {align}-byte aligned, as a streaming store "
                         f"of {n} {flat.dtype} elements must be")
    return flat, at


def vector(ty, values) -> Vector:
    """The ``Vec[ty, len(values)]`` whose lane k is ``values[k]`` (ty: i32, i64, f32, f64). At
    module level it is a constant a kernel reads like a number (``HALF = simd.vector(f64,
    (0.5, -0.5))``; the values are part of the kernel's identity)."""
    return np.array(values, dtype=ty.dtype).view(Vector)


def lane(x):
    """A scalar operand as the lane value it is compiled. A buffer element is, uncompiled, a
    numpy scalar of the buffer's type, which compiled code widens when it loads it: an ``i8
    u8 i16 u16`` element to i32, a ``u32 u64`` one to i64 (u64: the same bits). Lanes of the
    narrow type would wrap at 8 or 16 bits where the compiled i32 lanes do not (a ``u8`` 250
    splat, + 200: 194 instead of 450). Python numbers stay as they are: like literals, they
    take the other operand's type."""
    if isinstance(x, np.integer):
        info = np.iinfo(type(x))
        if info.bits < 32:
            return np.int32(x)
        if info.min == 0:
            return np.array(x).astype(np.int64)[()]  # a u64 >= 2**63 reads negative
    return x


def splat(x, n: int) -> Vector:
    x = lane(x)
    if type(x) is int:  # a Python int is an i64 (a u64 bit pattern up to 2**64 - 1 wraps)
        x = np.array(x % (1 << 64)).astype(np.int64)[()]
    return np.full(n, x, np.asarray(x).dtype).view(Vector)


def iota(ty, n: int) -> Vector:
    """The lane indices ``(0, 1, ..., n - 1)`` as a ``Vec[ty, n]`` (ty: i32, i64, f32, f64)."""
    return np.arange(n, dtype=ty.dtype).view(Vector)


def insert(v, k: int, x) -> Vector:
    out = np.array(v)
    out[k] = x
    return out.view(Vector)


def shuffle(v, lanes) -> Vector:
    return _vector(np.asarray(v)[list(lanes)])


def slice(v, start: int, n: int) -> Vector:  # noqa: A001 - the language's name for it
    if not 0 <= start <= start + n <= len(v) or n < 1:
        raise IndexError(f"simd.slice: lanes [{start}, {start + n}) of a vector of {len(v)}")
    return _vector(np.asarray(v)[start:start + n])


def select(mask, a, b) -> Vector:
    return _vector(np.where(mask, lane(a), lane(b)))


def min(a, b) -> Vector:  # noqa: A001 - the language's name for it
    a, b = lane(a), lane(b)
    return _vector(np.where(b < a, b, a))


def max(a, b) -> Vector:  # noqa: A001 - the language's name for it
    a, b = lane(a), lane(b)
    return _vector(np.where(b > a, b, a))


def _tree(v, combine, identity):
    """The documented reduction order: halves combined until one lane is left."""
    v = np.asarray(v)
    while len(v) > 1:
        h = (len(v) + 1) // 2
        hi = np.concatenate([v[h:], np.full(2 * h - len(v), identity, v.dtype)])
        v = np.asarray(combine(v[:h], hi), v.dtype)
    return v[0]


def identity(op: str, dtype: np.dtype):
    """The padding lane of a reduction (``x op identity == x`` for every x)."""
    if op == "add":
        return -0.0 if dtype.kind == "f" else 0
    if dtype.kind == "f":
        return -np.inf if op == "max" else np.inf
    return np.iinfo(dtype).min if op == "max" else np.iinfo(dtype).max


def reduce_add(v):
    return _tree(v, lambda a, b: a + b, identity("add", np.asarray(v).dtype))


def reduce_max(v):
    return _tree(v, lambda a, b: np.where(b > a, b, a), identity("max", np.asarray(v).dtype))


def reduce_min(v):
    return _tree(v, lambda a, b: np.where(b < a, b, a), identity("min", np.asarray(v).dtype))


def any(mask) -> bool:  # noqa: A001 - the language's name for it
    return bool(np.any(mask))


def all(mask) -> bool:  # noqa: A001 - the language's name for it
    return bool(np.all(mask))


OPERATIONS = {fill: "fill", copy: "copy", stream_fill: "stream_fill",
              stream_copy: "stream_copy", fence: "fence", prefetch: "prefetch"}
#: The vector-value operations (lowered by `vector_lower` and `lane_lower`).
VECTOR_OPERATIONS = {load: "load", store: "store", stream_store: "stream_store",
                     vector: "vector", splat: "splat", iota: "iota", insert: "insert",
                     shuffle: "shuffle", slice: "slice", select: "select", min: "min", max: "max",
                     reduce_add: "reduce_add", reduce_max: "reduce_max", reduce_min: "reduce_min",
                     any: "any", all: "all"}
