"""Types of the kernel language: scalars, buffer parameters, local arrays.

Scalars used in arithmetic: ``boolean`` (also spelled ``bool``), ``i32``, ``i64``, ``f32``,
``f64``. Storage-only types a buffer may hold: ``i8 u8 i16 u16 u32 u64``; loading one widens it
(``i8 u8 i16 u16`` -> i32, ``u32 u64`` -> i64, u64 by reinterpreting the bits) and storing into
one truncates (wraps), as numpy's ``astype`` does.

Each scalar is also a cast usable in kernels and in plain Python: ``f32(x)`` is
``numpy.float32(x)`` when the kernel runs uncompiled (``kernel.py_func``). Float -> int casts
truncate toward zero and saturate (NaN -> 0), which is defined where C and numpy are not.

``Buf[f32, "n", 4]`` annotates a C-contiguous buffer parameter: dtype then one extent per axis.
The dtype may be the name of a static parameter whose value is a type name (``Buf["gtype", n]``
with ``gtype="i16"``), for buffers whose element type depends on the configuration.
An extent is an int, the name of a static parameter or of an integer scalar parameter, or None
(unknown: allowed for the first axis only; it is not bounds-checked). A role marker may end the
brackets, ``Buf[f32, "n", 4, In("m", "the scan")]``, and a scalar's, ``i64[In("points")]``: what
the kernel does with the argument and what it holds, for its documented signature (`markers`).

``Vec[f32, 16]`` is the type of a vector *value* (16 f32 lanes, one ``<16 x float>``): element
``boolean`` (a mask, from comparing vectors), ``i32``, ``i64``, ``f32`` or ``f64``, 1 to
`MAX_LANES` lanes. It annotates locals (``acc: Vec[f32, 16] = ...``); the `simd` module makes
and consumes vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from .. import irutil as u
from .markers import Marked, Role


@dataclass(frozen=True)
class Scalar:
    """A scalar type: ``kind`` is ``b`` (bool), ``i`` (signed), ``u`` (unsigned), ``f`` (float)."""

    name: str
    kind: str
    bits: int

    @property
    def ir(self) -> ir.Type:
        if self.kind == "f":
            return u.F32 if self.bits == 32 else u.F64
        return ir.IntType(self.bits)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype({"b": "bool"}.get(self.kind, f"{self.kind}{self.bits // 8}"))

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def compute(self) -> "Scalar":
        """The arithmetic type a loaded value of this storage type has."""
        if self.kind == "u" or (self.kind == "i" and self.bits < 32):
            return I64 if self.bits >= 32 else I32
        return self

    def __call__(self, value):
        """The cast, in plain Python (numpy scalars: same rounding as the compiled kernel)."""
        if isinstance(value, np.ndarray):
            return _cast_lanes(self, value)
        if self.is_int and isinstance(value, (int, np.integer)) and not isinstance(
                value, (bool, np.bool_)):
            value = int(value) & ((1 << self.bits) - 1)  # wraps, as the compiled trunc does
            if self.kind == "i" and value >> (self.bits - 1):
                value -= 1 << self.bits  # (numpy raises for a Python int out of range)
        if self.is_int and isinstance(value, (float, np.floating)):
            value = float(value)  # exact comparisons with the int limits below
            info = np.iinfo(self.dtype)
            value = 0 if value != value else (info.max if value >= info.max else (
                info.min if value <= info.min else int(value)))
        return self.dtype.type(value)

    def __getitem__(self, role: Role) -> Marked:
        """``i64[In("points", "rows of points")]``: this scalar with its role marker."""
        if not isinstance(role, Role):
            raise TypeError(f"{self.name}[...]: takes a role marker, In(unit, doc), got {role!r}")
        return Marked(self, role)

    def __repr__(self) -> str:
        return self.name


def _cast_lanes(ty: Scalar, v: np.ndarray) -> np.ndarray:
    """A vector cast uncompiled: each lane as `Scalar.__call__` casts a scalar."""
    if ty.is_int and v.dtype.kind == "f":
        info, hi = np.iinfo(ty.dtype), float(2 ** (ty.bits - 1))
        with np.errstate(invalid="ignore"):
            inside = (v >= -hi) & (v < hi)
            out = np.where(inside, v, 0).astype(ty.dtype)
        out = np.where(v >= hi, info.max, np.where(v < -hi, info.min, out))
        return out.astype(ty.dtype).view(type(v))
    return v.astype(ty.dtype)


BOOL = Scalar("boolean", "b", 1)
I8, U8 = Scalar("i8", "i", 8), Scalar("u8", "u", 8)
I16, U16 = Scalar("i16", "i", 16), Scalar("u16", "u", 16)
I32, U32 = Scalar("i32", "i", 32), Scalar("u32", "u", 32)
I64, U64 = Scalar("i64", "i", 64), Scalar("u64", "u", 64)
F32, F64 = Scalar("f32", "f", 32), Scalar("f64", "f", 64)

#: Types a value may have in arithmetic (everything else is storage only).
COMPUTE = (BOOL, I32, I64, F32, F64)
#: Types a kernel parameter may have, by spec argument kind.
PARAM_KINDS = {I32: "i32", I64: "i64", F32: "f32", F64: "f64"}
BY_NAME = {t.name: t for t in (BOOL, I8, U8, I16, U16, I32, U32, I64, U64, F32, F64)}


@dataclass(frozen=True)
class BufType:
    """A buffer: element type and one extent per axis (int, parameter name or None)."""

    dtype: Scalar
    dims: tuple

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __repr__(self) -> str:
        return f"Buf[{self.dtype}, {', '.join(map(repr, self.dims))}]"


class Buf:
    """Annotation of a buffer parameter: ``Buf[f32, "n", 4]`` (see the module docstring)."""

    def __class_getitem__(cls, item) -> BufType | Marked:
        item = item if isinstance(item, tuple) else (item,)
        if len(item) > 1 and isinstance(item[-1], Role):
            return Marked(cls[item[:-1]], item[-1])
        dtype, dims = item[0], item[1:]
        if not isinstance(dtype, (Scalar, str)) or dtype is BOOL:
            raise TypeError(f"Buf[...]: the first item must be a numeric scalar type such as "
                            f"f32 (or the name of a static parameter holding one), got {dtype!r}")
        if not dims:
            dims = (None,)
        for k, d in enumerate(dims):
            if d is None and k > 0:
                raise TypeError("Buf[...]: only the first extent may be None (unknown)")
            if isinstance(d, Role):
                raise TypeError(f"Buf[...]: the role marker {d!r} goes last, after the extents")
            if not (d is None or isinstance(d, (int, str))):
                raise TypeError(f"Buf[...]: extent {d!r} must be an int, a parameter name or "
                                f"None")
        return BufType(dtype, tuple(dims))


#: The most lanes a vector may have (LLVM splits a wide vector into the target's registers:
#: ``<64 x float>`` is four zmm registers with AVX-512).
MAX_LANES = 256


@dataclass(frozen=True)
class VecType:
    """A vector value: ``lanes`` elements of the compute type ``elem`` (`BOOL` for a mask)."""

    elem: Scalar
    lanes: int

    @property
    def ir(self) -> ir.VectorType:
        return ir.VectorType(self.elem.ir, self.lanes)

    @property
    def name(self) -> str:
        return repr(self)

    def __repr__(self) -> str:
        return f"Vec[{self.elem}, {self.lanes}]"


class Vec:
    """Annotation of a vector local: ``Vec[f32, 16]`` (see the module docstring)."""

    def __class_getitem__(cls, item) -> VecType:
        return vec_type(*(item if isinstance(item, tuple) else (item,)))


def vec_type(elem=None, lanes=None, *extra) -> VecType:
    """`VecType` of ``elem`` and ``lanes``, or TypeError saying what is wrong."""
    if extra or not (isinstance(elem, Scalar) and elem in COMPUTE):
        raise TypeError(f"Vec[...] takes an element type (boolean, i32, i64, f32, f64) and a "
                        f"lane count, got {(elem, lanes, *extra)!r}")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_LANES:
        raise TypeError(f"Vec[...]: the lane count must be an int 1..{MAX_LANES}, "
                        f"got {lanes!r}")
    return VecType(elem, lanes)


def resolve_dtype(ty: BufType, static: dict) -> BufType:
    """``ty`` with a dtype named by a static parameter replaced by that type."""
    if isinstance(ty.dtype, Scalar):
        return ty
    name = static.get(ty.dtype)
    if name not in BY_NAME or BY_NAME[name] is BOOL:
        raise TypeError(f"static parameter '{ty.dtype}' must name a buffer type "
                        f"({', '.join(n for n in BY_NAME if n != 'boolean')}), got {name!r}")
    return BufType(BY_NAME[name], ty.dims)


def local(dtype: Scalar, *dims: int) -> np.ndarray:
    """A small zero-initialised array on the kernel's stack (extents are compile-time ints).

    Uncompiled it is ``numpy.zeros(dims, dtype)``."""
    return np.zeros(dims, dtype.dtype)


def view(address: int, dtype: Scalar, *dims: int) -> np.ndarray:
    """The buffer of ``dtype`` and extents ``dims`` at ``address`` (an int from a table of
    addresses, e.g. one per pyramid level). Uncompiled it is a numpy view of that memory."""
    import ctypes

    count = int(np.prod(dims)) if dims else 1
    raw = (ctypes.c_byte * (count * dtype.dtype.itemsize)).from_address(int(address))
    return np.frombuffer(raw, dtype.dtype).reshape(dims)


def address(arr: np.ndarray) -> int:
    """The address of a buffer's first element, as an int (to `view` it as another type)."""
    return arr.ctypes.data


def select(cond, a, b):
    """``a if cond else b`` with both sides evaluated: compiles to one ``select`` instruction
    (branch-free, so a loop containing it can be vectorised)."""
    return a if cond else b
