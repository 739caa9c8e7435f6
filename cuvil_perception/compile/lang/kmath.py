"""The kernel language's math module: ``from cuvil_perception.compile.lang import kmath``.

Each function is plain numpy when the kernel runs uncompiled (``kernel.py_func``), but where
the compiled code calls the C library (libm: the "libm" rows below), the twin calls the same
C function through ctypes (`_libm`, lane by lane on a vector), and an f32 polynomial of
`kpoly` runs the same operations in numpy, so both give the same bits; compiled, it lowers to
LLVM. Results keep the argument's float type (f32 in, f32 out);
integer arguments are converted to f64 first, as numpy does. The f32 accuracy, measured
against numpy's float64 by ``benchmarks/kmath_accuracy.py``, is in docs/kernel-language.md.

==========  =========================================================================
function    compiled as
==========  =========================================================================
sqrt        ``llvm.sqrt`` (correctly rounded, vectorises)
exp         f32: the polynomial of `irutil.vexp` (<= 1.5e-7 relative, vectorises);
            f64: ``llvm.exp`` (libm)
log         f32: `kpoly` (below); f64: ``llvm.log`` (libm)
floor/ceil  ``llvm.floor`` / ``llvm.ceil`` (return floats, like numpy)
trunc       ``llvm.trunc``
round       ``llvm.roundeven``: ties to even, as Python's ``round`` and ``numpy.round``
            (not C's ``round``, which takes ties away from zero); a float, one instruction
sin/cos     ``llvm.sin`` / ``llvm.cos`` (libm)
tan         ``llvm.tan`` (libm)
asin/acos   f32: `kpoly`; f64: ``llvm.asin`` / ``llvm.acos`` (libm)
atan/atan2  f32: `kpoly`; f64: ``llvm.atan`` / ``llvm.atan2`` (libm)
sinh/cosh   f32: `kpoly`; f64: ``llvm.sinh`` / ``llvm.cosh`` (libm)
tanh        f32: `kpoly`; f64: ``llvm.tanh`` (libm)
pow         ``llvm.pow`` (libm), as ``x ** y`` of floats
hypot       f32: in f64, ``sqrt(x*x + y*y)`` rounded to f32 (no call, vectorises; an
            infinite argument gives +inf); f64: ``hypot`` (libm)
expm1       f32: `kpoly`; f64: ``expm1`` (libm; no LLVM intrinsic)
log1p       f32: `kpoly`; f64: ``log1p`` (libm; no LLVM intrinsic)
erf         f32: `kpoly`; f64: ``erf`` (libm; no LLVM intrinsic; uncompiled without a C
            library: ``math.erf``)
fma         ``llvm.fma`` (one rounding; uncompiled f32: the float64 product-sum, rounded);
            a target without FMA gets a multiply then an add, never libm (`fma_split`)
isnan       ``x != x``
sigmoid     f32: ``1 / (1 + exp(-x))`` with the polynomial exp (see `irutil.sigmoid`);
            f64: with ``llvm.exp`` (libm)
==========  =========================================================================

`kpoly`: Cephes' polynomials computed in f64 and rounded once (<= 0.83 ulp), no call, the
same operations uncompiled. A libm function is a call per element (per lane of a vector: LLVM
has no vector library set, so a loop calling one does not vectorise), and a C library export
of the kernel needs the C library at link time.

Bit counts of an int (i32 or i64; the result has the argument's type; a u64 buffer element
loads as i64 with the same bits):

==========  =========================================================================
ctz         trailing zero bits (``llvm.cttz``: one ``tzcnt``); the bit width when x == 0
popcount    set bits (``llvm.ctpop``: one ``popcnt``)
==========  =========================================================================
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from . import folding, kpoly


def _float(x):
    return x if isinstance(x, (np.floating, np.ndarray)) else np.float64(x)


def _libm(name: str, out, *args):
    """numpy's result ``out`` for ``name(*args)``, replaced by the C library's function, the
    one the compiled code calls (``llvm.log`` -> ``log`` / ``logf``), lane by lane for a
    vector: numpy's own differ in the last bit (f64 exp: 5% of arguments, f32 atan2: 45%).
    f32 ``exp`` stays numpy's (compiled, it is the polynomial), as does everything where
    there is no C library to load."""
    kind = np.asarray(out).dtype
    if kind == np.float32 and name in kpoly.FUNCTIONS:
        return kpoly.evaluate(name, *args)  # (compiled, the f32 polynomial: no libm)
    if kind not in (np.float32, np.float64) or (kind == np.float32 and name == "exp"):
        return out
    fn = c_function(name, kind.itemsize * 8)
    if fn is None:
        return out
    if not isinstance(out, np.ndarray) or out.ndim == 0:
        return kind.type(fn(*map(float, args)))
    lanes = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
    values = [fn(*map(float, row)) for row in zip(*(v.reshape(-1) for v in lanes))]
    return np.array(values, kind).reshape(out.shape).view(type(out))


#: The C library functions of two arguments (the others take one).
_BINARY = ("atan2", "pow", "hypot")


@functools.lru_cache(maxsize=None)
def c_function(name: str, bits: int):
    """The C library's ``name`` (``bits`` 64) or ``namef`` (32) through ctypes, or None where
    there is no C library to load. The compiled code calls the same functions (the process's
    libm, resolved when the kernel's object is loaded)."""
    path = ctypes.util.find_library("m")
    if path is None:
        return None
    try:
        fn = getattr(ctypes.CDLL(path), name + ("f" if bits == 32 else ""))
    except (OSError, AttributeError):
        return None
    kind = ctypes.c_float if bits == 32 else ctypes.c_double
    fn.restype = kind
    fn.argtypes = [kind] * (2 if name in _BINARY else 1)
    return fn


def sqrt(x):
    return np.sqrt(_float(x))


def exp(x):
    with np.errstate(over="ignore", under="ignore"):
        return _libm("exp", np.exp(_float(x)), x)


def log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _libm("log", np.log(_float(x)), x)


def floor(x):
    return np.floor(_float(x))


def ceil(x):
    return np.ceil(_float(x))


def trunc(x):
    return np.trunc(_float(x))


def atan2(y, x):
    return _libm("atan2", np.arctan2(_float(y), _float(x)), y, x)


def sin(x):
    with np.errstate(invalid="ignore"):
        return _libm("sin", np.sin(_float(x)), x)


def cos(x):
    with np.errstate(invalid="ignore"):
        return _libm("cos", np.cos(_float(x)), x)


def _unary(name: str, numpy_fn):
    """The uncompiled twin of a one-argument C library function (`_libm`)."""
    def fn(x):
        with np.errstate(all="ignore"):
            return _libm(name, numpy_fn(_float(x)), x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(x)``; see the module docstring for how it is compiled."
    return fn


asin, acos, atan = _unary("asin", np.arcsin), _unary("acos", np.arccos), _unary("atan", np.arctan)
tan = _unary("tan", np.tan)
sinh, cosh, tanh = _unary("sinh", np.sinh), _unary("cosh", np.cosh), _unary("tanh", np.tanh)
expm1, log1p = _unary("expm1", np.expm1), _unary("log1p", np.log1p)
erf = _unary("erf", lambda x: _lanes(math.erf, x))  # (numpy has none; libm's replaces it)


def _lanes(fn, x):
    """``fn`` (a Python float function) of each lane of ``x``, in x's float type."""
    kind = np.asarray(x).dtype
    if np.ndim(x) == 0:
        return kind.type(fn(float(x)))
    return np.array([fn(float(v)) for v in x.reshape(-1)], kind).reshape(x.shape).view(type(x))


def pow(x, y):  # noqa: A001 - the C name, as math.pow
    """``x ** y`` of floats (the C library's ``pow``, as compiled)."""
    with np.errstate(all="ignore"):
        return _libm("pow", np.power(_float(x), _float(y)), x, y)


def round(x):  # noqa: A001 - the name users expect, as numpy.round
    """``x`` rounded to the nearest integer, ties to even (Python's ``round`` and
    ``numpy.round``, not C's ``round``: ``round(2.5)`` is 2.0), as a float of x's type."""
    return np.rint(_float(x))


def hypot(x, y):
    """``sqrt(x*x + y*y)`` without overflow: f32 computed in f64 (the squares and their sum
    cannot overflow, the sum is rounded once, then the root), as compiled; f64 the C
    library's. An infinite argument gives +inf (NaN in the other too), as C's."""
    x, y = _float(x), _float(y)
    if np.result_type(x, y) == np.float64:
        with np.errstate(all="ignore"):
            return _libm("hypot", np.hypot(x, y), x, y)
    wide_x, wide_y = np.float64(x) if np.ndim(x) == 0 else x.astype(np.float64), \
        np.float64(y) if np.ndim(y) == 0 else y.astype(np.float64)
    with np.errstate(all="ignore"):
        out = np.sqrt(wide_x * wide_x + wide_y * wide_y)
        out = np.where(np.isinf(wide_x) | np.isinf(wide_y), np.inf, out)
    vector = next((v for v in (x, y) if isinstance(v, np.ndarray) and v.ndim), None)
    if vector is None:
        return np.float32(out)
    return out.astype(np.float32).view(type(vector))


def fma(a, b, c):
    a, b, c = _float(a), _float(b), _float(c)
    kind = np.result_type(a, b, c)
    if kind == np.float64:  # rounded once, as llvm.fma (the f64 sum below rounds twice)
        vector = next((v for v in (a, b, c) if isinstance(v, np.ndarray) and v.ndim), None)
        if vector is None:
            return np.float64(folding.fma(float(a), float(b), float(c)))
        lanes = np.broadcast_arrays(a, b, c)
        out = [folding.fma(*map(float, row)) for row in zip(*lanes)]
        return np.array(out, np.float64).view(type(vector))
    exact = np.float64(a) * np.float64(b) + np.float64(c)  # f32: the product is exact
    return kind.type(exact)


def isnan(x):
    return bool(np.isnan(x))


def sigmoid(x):
    x = _float(x)
    with np.errstate(over="ignore", under="ignore"):
        out = 1.0 / (1.0 + exp(-np.float64(x)))  # (f64: libm's exp, as compiled)
    return out.astype(x.dtype) if isinstance(x, np.ndarray) else type(x)(out)  # (a vector)


def _bits(x) -> tuple[int, int]:
    """(the value's bits as a non-negative int, its width): numpy ints keep theirs, Python
    ints and bools count as i64 (the type they take in a kernel)."""
    width = np.dtype(type(x)).itemsize * 8 if isinstance(x, np.integer) else 64
    return int(x) & ((1 << width) - 1), width


def ctz(x):
    v, width = _bits(x)
    return (v & -v).bit_length() - 1 if v else width


def popcount(x):
    return bin(_bits(x)[0]).count("1")


#: numpy's names of functions `kmath` has under C's (``numpy.arcsin`` is ``kmath.asin``)
_NUMPY_NAMES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
                "power": "pow", "rint": "round", "fabs": "abs"}


def suggest(name: str) -> str:
    """What to write instead of the math / numpy / builtin function ``name`` in a kernel."""
    name = _NUMPY_NAMES.get(name, name)
    if name in ("abs", "min", "max"):
        return f"the builtin `{name}(...)`"
    if callable(globals().get(name)) and not name.startswith("_") and name != "suggest":
        return f"`kmath.{name}(...)` (`from cuvil_perception.compile.lang import kmath`)"
    names = " ".join(sorted(f.__name__ for f in (*FUNCTIONS, *INT_FUNCTIONS)))
    return f"a function of the kernel math module `kmath` ({names})"


#: integer functions -> LLVM intrinsic
INT_FUNCTIONS = {ctz: "llvm.cttz", popcount: "llvm.ctpop"}

#: name -> (LLVM intrinsic or a special lowering, number of arguments)
FUNCTIONS = {sqrt: ("llvm.sqrt", 1), exp: ("exp", 1), log: ("llvm.log", 1),
             floor: ("llvm.floor", 1), ceil: ("llvm.ceil", 1), trunc: ("llvm.trunc", 1),
             atan2: ("llvm.atan2", 2), sin: ("llvm.sin", 1), cos: ("llvm.cos", 1),
             fma: ("llvm.fma", 3), isnan: ("isnan", 1), sigmoid: ("sigmoid", 1),
             asin: ("llvm.asin", 1), acos: ("llvm.acos", 1), atan: ("llvm.atan", 1),
             tan: ("llvm.tan", 1), sinh: ("llvm.sinh", 1), cosh: ("llvm.cosh", 1),
             tanh: ("llvm.tanh", 1), pow: ("llvm.pow", 2), round: ("llvm.roundeven", 1),
             hypot: ("hypot", 2), expm1: ("libm.expm1", 1), log1p: ("libm.log1p", 1),
             erf: ("libm.erf", 1)}
