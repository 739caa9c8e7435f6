"""Accuracy of the `kmath` functions in f32 ulps, against numpy's float64 result (``math.erf``
for erf, which numpy lacks) rounded nowhere: ``|f32 result - f64 reference| / ulp``, the ulp
being the f32 spacing at the reference. Each function is called through a compiled kernel
(the uncompiled twin gives the same bits, `tests/test_lang_kmath.py`) on 200k log-uniform
random arguments over its domain plus edge values (0, -0, subnormals, +-1, huge, inf, NaN).

    PYTHONPATH=. python benchmarks/kmath_accuracy.py [--n 200000] [--speed]

Prints one row per function: the max and mean ulps over finite references, and whether the
NaN / inf results agree with the reference's. The f64 functions but the exact ones (sqrt, the
rounding functions, fma) call the C library (glibc on Linux: its
manual's "Known Maximum Errors in Math Functions" table), not measured here: there is no
wider reference without mpmath.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cuvil_perception.compile.lang import Buf, f32, i64, kernel, kmath  # noqa: E402

#: function name -> (numpy f64 reference, argument range (log-uniform magnitude, both signs))
UNARY = {"asin": (np.arcsin, 1.0), "acos": (np.arccos, 1.0), "atan": (np.arctan, 1e30),
         "tan": (np.tan, 1e4), "sinh": (np.sinh, 90.0), "cosh": (np.cosh, 90.0),
         "tanh": (np.tanh, 20.0), "expm1": (np.expm1, 88.0), "log1p": (np.log1p, 1e30),
         "erf": (np.vectorize(math.erf, otypes=[np.float64]), 5.0),
         "exp": (np.exp, 88.0), "log": (np.log, 1e30), "sin": (np.sin, 1e4),
         "cos": (np.cos, 1e4), "round": (np.rint, 1e8), "sigmoid": (
             lambda x: 1.0 / (1.0 + np.exp(-x)), 80.0)}  # (below -88 the f32 one is 0)
BINARY = {"pow": (np.power, 30.0), "hypot": (np.hypot, 1e38), "atan2": (np.arctan2, 1e30)}
EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 0.5, -0.5, 1.0, -1.0, 2.5,
                  3.5, 1e30, -1e30, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan], np.float32)


def arguments(rng, top: float, n: int, positive: bool = False) -> np.ndarray:
    """``n`` f32 values with log-uniform magnitude in [1e-30, top], signs random, + edges."""
    mag = np.exp(rng.uniform(np.log(1e-30), np.log(top), n))
    mag = np.where(rng.random(n) < 0.5, rng.uniform(0, top, n), mag)
    sign = 1.0 if positive else np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return np.concatenate([(mag * sign).astype(np.float32), EDGES])


@kernel(name="bench.kmath_unary")
def _unary(x: Buf[f32, "n"], out: Buf[f32, 16, "n"], n: i64):
    """Each row of ``out``: one function of `UNARY` (in its order) of ``x``."""
    for i in range(n):
        a = x[i]
        out[0, i], out[1, i], out[2, i] = kmath.asin(a), kmath.acos(a), kmath.atan(a)
        out[3, i], out[4, i], out[5, i] = kmath.tan(a), kmath.sinh(a), kmath.cosh(a)
        out[6, i], out[7, i], out[8, i] = kmath.tanh(a), kmath.expm1(a), kmath.log1p(a)
        out[9, i], out[10, i], out[11, i] = kmath.erf(a), kmath.exp(a), kmath.log(a)
        out[12, i], out[13, i], out[14, i] = kmath.sin(a), kmath.cos(a), kmath.round(a)
        out[15, i] = kmath.sigmoid(a)


@kernel(name="bench.kmath_binary")
def _binary(x: Buf[f32, "n"], y: Buf[f32, "n"], out: Buf[f32, 3, "n"], n: i64):
    """Each row of ``out``: one function of `BINARY` (in its order) of ``x``, ``y``."""
    for i in range(n):
        a, b = x[i], y[i]
        out[0, i], out[1, i], out[2, i] = kmath.pow(a, b), kmath.hypot(a, b), kmath.atan2(a, b)


def ulps(got: np.ndarray, ref: np.ndarray) -> tuple[float, float, bool]:
    """(max ulps, mean ulps over finite references, special values agree)."""
    finite = np.isfinite(ref) & (np.abs(ref) <= np.finfo(np.float32).max)
    spacing = np.spacing(np.abs(ref[finite]).astype(np.float32)).astype(np.float64)
    spacing = np.maximum(spacing, 2.0 ** -149)
    err = np.abs(got[finite].astype(np.float64) - ref[finite]) / spacing
    special = ~finite
    with np.errstate(over="ignore"):  # (a reference past FLT_MAX is inf in f32)
        want = ref[special].astype(np.float32)
    same = np.array_equal(got[special], want, equal_nan=True)
    return float(err.max(initial=0.0)), float(err.mean()) if err.size else 0.0, same


def measure(name: str, n: int, rng) -> tuple[float, float, bool]:
    """ulps of the compiled f32 function ``name`` (see `ulps`)."""
    table = BINARY if name in BINARY else UNARY
    ref_fn, top = table[name]
    x = arguments(rng, top, n, positive=name in ("log", "pow"))
    with np.errstate(all="ignore"):
        if name in BINARY:
            y = arguments(rng, 8.0 if name == "pow" else top, n)
            rng.shuffle(y)
            out = np.empty((3, len(x)), np.float32)
            _binary(x, y, out, len(x))
            ref = ref_fn(x.astype(np.float64), y.astype(np.float64))
        else:
            out = np.empty((16, len(x)), np.float32)
            _unary(x, out, len(x))
            ref = ref_fn(x.astype(np.float64))
    return ulps(out[list(table).index(name)], np.asarray(ref, np.float64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--speed", action="store_true", help="also time a few functions")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    info = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    cpu = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                if line.startswith("model name")), "?")
    cpu += " (AVX-512)" if " avx512f" in info else " (AVX2)" if " avx2" in info else ""
    print(f"# f32 kmath vs numpy float64, {args.n} random + {len(EDGES)} edge arguments; {cpu}")
    print(f"{'function':10} {'max ulp':>8} {'mean ulp':>9}  inf/nan agree")
    for name in (*UNARY, *BINARY):
        worst, mean, same = measure(name, args.n, rng)
        print(f"{name:10} {worst:8.3f} {mean:9.4f}  {same}")
    if args.speed:
        speed()



@kernel(name="bench.kmath_speed")
def _speed(x: Buf[f32, "n"], y: Buf[f32, "n"], out: Buf[f32, "n"], n: i64, *, fn: int):
    """out[i] = one function of x[i] (y[i]): 0 atan2, 1 asin, 2 atan, 3 tan (a libm call),
    4 erf, 5 hypot, 6 tanh."""
    for i in range(n):
        if fn == 0:
            out[i] = kmath.atan2(y[i], x[i])
        elif fn == 1:
            out[i] = kmath.asin(x[i])
        elif fn == 2:
            out[i] = kmath.atan(x[i])
        elif fn == 3:
            out[i] = kmath.tan(x[i])
        elif fn == 4:
            out[i] = kmath.erf(x[i])
        elif fn == 6:
            out[i] = kmath.tanh(x[i])
        else:
            out[i] = kmath.hypot(x[i], y[i])


def speed(n: int = 1 << 20) -> None:
    """ns per element of a compiled loop against numpy's float32 ufunc, interleaved, best of
    7 rounds (one thread)."""
    import time

    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    out = np.empty_like(x)
    erf = np.vectorize(math.erf, otypes=[np.float32])
    cases = [("atan2", 0, lambda: np.arctan2(y, x)), ("asin", 1, lambda: np.arcsin(x)),
             ("atan", 2, lambda: np.arctan(x)), ("tan (libm)", 3, lambda: np.tan(x)),
             ("erf", 4, lambda: erf(x[: n // 64])), ("hypot", 5, lambda: np.hypot(x, y)),
             ("tanh", 6, lambda: np.tanh(x))]
    print(f"\n# ns per element, {n} f32 elements, one thread")
    print(f"{'function':12} {'kernel':>8} {'numpy':>8}")
    for name, code, reference in cases:
        _speed(x, y, out, n, fn=code)
        best_k = best_np = float("inf")
        for _ in range(7):
            t = time.perf_counter()
            _speed(x, y, out, n, fn=code)
            best_k = min(best_k, time.perf_counter() - t)
            t = time.perf_counter()
            reference()
            best_np = min(best_np, time.perf_counter() - t)
        scale = 64 if name == "erf" else 1  # (numpy has no erf: math.erf on 1/64)
        print(f"{name:12} {best_k / n * 1e9:8.2f} {best_np / n * scale * 1e9:8.2f}")


if __name__ == "__main__":
    main()
