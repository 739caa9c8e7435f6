"""The kernel language's math module: ``from cuvil_perception.compile.lang import kmath``.

Each function is plain numpy when the kernel runs uncompiled (``kernel.py_func``), but for
``log atan2 sin cos`` (and on f64 ``exp`` and ``fma``), which call the C library's, as the
compiled code does (`_libm`); compiled, it lowers to LLVM. Results keep the argument's float
type (f32 in, f32 out); integer arguments are converted to f64 first, as numpy does.

==========  =========================================================================
function    compiled as
==========  =========================================================================
sqrt        ``llvm.sqrt`` (correctly rounded, vectorises)
exp         f32: the polynomial of `irutil.vexp` (<= 1.5e-7 relative, vectorises);
            f64: ``llvm.exp`` (libm)
log         ``llvm.log`` (libm)
floor/ceil  ``llvm.floor`` / ``llvm.ceil`` (return floats, like numpy)
trunc       ``llvm.trunc``
atan2       ``llvm.atan2`` (libm)
sin/cos     ``llvm.sin`` / ``llvm.cos`` (libm)
fma         ``llvm.fma`` (one rounding; uncompiled f32: the float64 product-sum, rounded);
            a target without FMA gets a multiply then an add, never libm (`fma_split`)
isnan       ``x != x``
sigmoid     f32: ``1 / (1 + exp(-x))`` with the polynomial exp (see `irutil.sigmoid`)
==========  =========================================================================

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

import numpy as np

from . import folding


def _float(x):
    return x if isinstance(x, (np.floating, np.ndarray)) else np.float64(x)


def _libm(name: str, out, *args):
    """numpy's result ``out`` for ``name(*args)``, replaced by the C library's function, the
    one the compiled code calls (``llvm.log`` -> ``log`` / ``logf``), lane by lane for a
    vector: numpy's own differ in the last bit (f64 exp: 5% of arguments, f32 atan2: 45%).
    f32 ``exp`` stays numpy's (compiled, it is the polynomial), as does everything where
    there is no C library to load."""
    kind = np.asarray(out).dtype
    if kind == np.float64:
        fn = functools.partial(folding.libm, name)
    elif kind == np.float32 and name != "exp" and _c_f32(name) is not None:
        fn = _c_f32(name)
    else:
        return out
    if not isinstance(out, np.ndarray) or out.ndim == 0:
        return kind.type(fn(*map(float, args)))
    lanes = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
    values = [fn(*map(float, row)) for row in zip(*(v.reshape(-1) for v in lanes))]
    return np.array(values, kind).reshape(out.shape).view(type(out))


@functools.lru_cache(maxsize=None)
def _c_f32(name: str):
    """The C library's f32 ``name`` (``logf``...) through ctypes, or None without one."""
    path = ctypes.util.find_library("m")
    if path is None:
        return None
    try:
        fn = getattr(ctypes.CDLL(path), f"{name}f")
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float] * (2 if name == "atan2" else 1)
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


#: integer functions -> LLVM intrinsic
INT_FUNCTIONS = {ctz: "llvm.cttz", popcount: "llvm.ctpop"}

#: name -> (LLVM intrinsic or a special lowering, number of arguments)
FUNCTIONS = {sqrt: ("llvm.sqrt", 1), exp: ("exp", 1), log: ("llvm.log", 1),
             floor: ("llvm.floor", 1), ceil: ("llvm.ceil", 1), trunc: ("llvm.trunc", 1),
             atan2: ("llvm.atan2", 2), sin: ("llvm.sin", 1), cos: ("llvm.cos", 1),
             fma: ("llvm.fma", 3), isnan: ("isnan", 1), sigmoid: ("sigmoid", 1)}
