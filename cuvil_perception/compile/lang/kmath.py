"""The kernel language's math module: ``from cuvil_perception.compile.lang import kmath``.

Each function is plain numpy when the kernel runs uncompiled (``kernel.py_func``), and lowers to
LLVM when it is compiled. Results keep the argument's float type (f32 in, f32 out); integer
arguments are converted to f64 first, as numpy does.

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
fma         ``llvm.fma`` (one rounding; uncompiled: the float64 product-sum, rounded)
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

import numpy as np


def _float(x):
    return x if isinstance(x, (np.floating, np.ndarray)) else np.float64(x)


def sqrt(x):
    return np.sqrt(_float(x))


def exp(x):
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(_float(x))


def log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(_float(x))


def floor(x):
    return np.floor(_float(x))


def ceil(x):
    return np.ceil(_float(x))


def trunc(x):
    return np.trunc(_float(x))


def atan2(y, x):
    return np.arctan2(_float(y), _float(x))


def sin(x):
    return np.sin(_float(x))


def cos(x):
    return np.cos(_float(x))


def fma(a, b, c):
    a, b, c = _float(a), _float(b), _float(c)
    kind = np.result_type(a, b, c)
    exact = np.float64(a) * np.float64(b) + np.float64(c)
    return kind.type(exact)


def isnan(x):
    return bool(np.isnan(x))


def sigmoid(x):
    x = _float(x)
    with np.errstate(over="ignore", under="ignore"):
        out = 1.0 / (1.0 + np.exp(-np.float64(x)))
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
