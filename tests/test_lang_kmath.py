"""The `kmath` library: every function compiled gives the uncompiled twin's bits (f32 and f64,
scalars and vector lanes, random and edge arguments: 0, -0, subnormal, +-1, huge, +-inf,
NaN), f32 results stay within the ulps docs/kernel-language.md states (against numpy's
float64, `benchmarks/kmath_accuracy.py` measures the table), constants fold to what the code
computes, ``round`` is ties-to-even (Python's and numpy's), and ``math.asin`` in a kernel
points at ``kmath.asin``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f32, f64, i64, kernel, kmath
from cuvil_perception.errors import KernelSourceError

UNARY = ("asin", "acos", "atan", "tan", "sinh", "cosh", "tanh", "expm1", "log1p", "erf",
         "round", "exp", "log", "sin", "cos", "sqrt")
BINARY = ("pow", "hypot", "atan2")
#: compiled f32 ``exp`` is the polynomial (`irutil.vexp`), its twin numpy's: apart <= 2 ulps
TWIN_ULPS = {"exp": 2}
#: the f32 ulps docs/kernel-language.md states (max over its measurement, rounded up; the
#: polynomials of `kpoly` round once from f64: 0.5 and a double rounding)
F32_ULPS = {"asin": 0.6, "acos": 0.6, "atan": 0.85, "atan2": 0.85, "tan": 1, "sinh": 0.51,
            "cosh": 0.51, "tanh": 0.51, "expm1": 0.51, "log1p": 0.51, "erf": 0.51,
            "log": 0.51, "round": 0, "pow": 0.51, "hypot": 0.51}
EDGES = [0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.1754944e-38, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5,
         3.5, 1e30, -1e30, 3.4e38, -3.4e38, math.inf, -math.inf, math.nan, 1e300, -1e-310]


@kernel(name="test.kmath_unary")
def unary(x: Buf["t", "n"], out: Buf["t", 16, "n"], n: i64, *, t: str):
    """Each row of ``out``: one function of `UNARY` of ``x`` (scalars)."""
    for i in range(n):
        a = x[i]
        out[0, i], out[1, i], out[2, i] = kmath.asin(a), kmath.acos(a), kmath.atan(a)
        out[3, i], out[4, i], out[5, i] = kmath.tan(a), kmath.sinh(a), kmath.cosh(a)
        out[6, i], out[7, i], out[8, i] = kmath.tanh(a), kmath.expm1(a), kmath.log1p(a)
        out[9, i], out[10, i], out[11, i] = kmath.erf(a), kmath.round(a), kmath.exp(a)
        out[12, i], out[13, i], out[14, i] = kmath.log(a), kmath.sin(a), kmath.cos(a)
        out[15, i] = kmath.sqrt(a)


@kernel(name="test.kmath_binary")
def binary(x: Buf["t", "n"], y: Buf["t", "n"], out: Buf["t", 3, "n"], n: i64, *, t: str):
    for i in range(n):
        a, b = x[i], y[i]
        out[0, i], out[1, i], out[2, i] = kmath.pow(a, b), kmath.hypot(a, b), kmath.atan2(a, b)


@kernel(name="test.kmath_lanes")
def lanes(x: Buf["t", "n", 8], y: Buf["t", "n", 8], out: Buf["t", 8, "n", 8], n: i64, *,
          t: str):
    """The new functions lane-wise on 8-lane vectors (libm calls lane by lane, hypot f32
    inline, round one instruction)."""
    for i in range(n):
        a, b = x[i, :], y[i, :]
        out[0, i, :], out[1, i, :] = kmath.asin(a), kmath.tanh(a)
        out[2, i, :], out[3, i, :] = kmath.erf(a), kmath.expm1(a)
        out[4, i, :], out[5, i, :] = kmath.round(a), kmath.pow(a, b)
        out[6, i, :], out[7, i, :] = kmath.hypot(a, b), kmath.log1p(a)


def arguments(dtype, n: int = 3000, seed: int = 0) -> np.ndarray:
    """Random arguments across magnitudes 1e-30 .. 1e4 (both signs, uniform in [-3, 3] too),
    then the edge values."""
    rng = np.random.default_rng(seed)
    mag = np.exp(rng.uniform(np.log(1e-30), np.log(1e4), n))
    mag = np.where(rng.random(n) < 0.5, rng.uniform(0, 3, n), mag)
    x = np.where(rng.random(n) < 0.5, -mag, mag)
    with np.errstate(over="ignore"):
        return np.concatenate([x, EDGES]).astype(dtype)


def same_bits(got: np.ndarray, want: np.ndarray, ulps: int = 0) -> None:
    """Equal bit for bit (within ``ulps``: apart by at most that many representable values),
    NaNs compared as NaN (their payload is the C library's either way)."""
    assert got.dtype == want.dtype
    nan = np.isnan(got)
    np.testing.assert_array_equal(nan, np.isnan(want))
    bits = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    if ulps == 0:
        np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))
    else:  # (finite values of one sign: their bit patterns are ordered)
        assert np.array_equal(np.isinf(got), np.isinf(want)) and np.all(
            np.abs(got[~nan].view(bits).astype(np.int64) - want[~nan].view(bits)) <= ulps)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_unary_compiled_equals_twin(t):
    x = arguments(np.dtype(t.replace("f", "float")))
    got, want = np.zeros((16, len(x)), x.dtype), np.zeros((16, len(x)), x.dtype)
    with np.errstate(all="ignore"):
        unary(x, got, len(x), t=t)
        unary.py_func(x, want, len(x), t=t)
    for k, name in enumerate(UNARY):
        try:
            same_bits(got[k], want[k], TWIN_ULPS.get(name, 0) if t == "f32" else 0)
        except AssertionError as e:
            raise AssertionError(f"kmath.{name} {t}: {e}") from None


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_binary_compiled_equals_twin(t):
    x = arguments(np.dtype(t.replace("f", "float")))
    y = np.roll(arguments(np.dtype(t.replace("f", "float")), seed=1), 7)
    got, want = np.zeros((3, len(x)), x.dtype), np.zeros((3, len(x)), x.dtype)
    with np.errstate(all="ignore"):
        binary(x, y, got, len(x), t=t)
        binary.py_func(x, y, want, len(x), t=t)
    for k, name in enumerate(BINARY):
        try:
            same_bits(got[k], want[k])
        except AssertionError as e:
            raise AssertionError(f"kmath.{name} {t}: {e}") from None


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_vector_lanes_equal_the_twin(t):
    x = arguments(np.dtype(t.replace("f", "float")), n=1000)[:1016].reshape(-1, 8)
    y = arguments(np.dtype(t.replace("f", "float")), n=1000, seed=2)[:1016].reshape(-1, 8)
    got, want = (np.zeros((8, len(x), 8), x.dtype) for _ in range(2))
    with np.errstate(all="ignore"):
        lanes(x, y, got, len(x), t=t)
        lanes.py_func(x, y, want, len(x), t=t)
    same_bits(got, want)


def _ulps(got: np.ndarray, ref: np.ndarray) -> float:
    """The largest error of f32 ``got`` against the f64 ``ref``, in f32 ulps at ``ref``, over
    the finite references inside f32's range."""
    keep = np.isfinite(ref) & (np.abs(ref) <= np.finfo(np.float32).max)
    spacing = np.maximum(np.spacing(np.abs(ref[keep]).astype(np.float32)), 2.0 ** -149)
    return float((np.abs(got[keep].astype(np.float64) - ref[keep]) / spacing).max())


REFERENCE = {"log": np.log, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "tan": np.tan,
             "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "expm1": np.expm1,
             "log1p": np.log1p, "erf": np.vectorize(math.erf, otypes=[np.float64]),
             "round": np.rint, "pow": np.power, "hypot": np.hypot, "atan2": np.arctan2}


def test_f32_accuracy_within_the_documented_ulps():
    x = arguments(np.float32, n=20000)
    y = np.roll(arguments(np.float32, n=20000, seed=3), 11)
    out1, out2 = np.zeros((16, len(x)), np.float32), np.zeros((3, len(x)), np.float32)
    with np.errstate(all="ignore"):
        unary(x, out1, len(x), t="f32")
        binary(np.abs(x), y, out2, len(x), t="f32")  # (pow of a negative base is NaN)
        for name, bound in F32_ULPS.items():
            if name in BINARY:
                wx = np.abs(x).astype(np.float64)
                got = out2[BINARY.index(name)]
                ref = REFERENCE[name](wx, y.astype(np.float64))
            else:
                got, ref = out1[UNARY.index(name)], REFERENCE[name](x.astype(np.float64))
            # inf / NaN where the reference has them (overflow past FLT_MAX is inf)
            special = ~np.isfinite(ref.astype(np.float32))
            np.testing.assert_array_equal(got[special], ref[special].astype(np.float32),
                                          err_msg=name)
            assert _ulps(got, ref) <= bound, name


def test_round_is_ties_to_even_as_python_and_numpy():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -0.4, 2.6, 1e20, 8388609.0], np.float32)
    got = np.zeros((16, len(x)), np.float32)
    unary(x, got, len(x), t="f32")
    row = got[UNARY.index("round")]
    np.testing.assert_array_equal(row, np.round(x))
    assert list(row[:6]) == [float(round(float(v))) for v in x[:6]] == [0, 2, 2, 0, -2, 4]
    assert math.copysign(1.0, row[3]) == -1.0  # -0.5 rounds to -0.0, as numpy's
    assert kmath.round(2.5) == 2.0 and kmath.round(np.float32(-1.5)).dtype == np.float32


def test_hypot_f32_does_not_overflow_early_and_takes_inf_over_nan():
    x = np.array([3e38, 2e38, np.inf, np.nan, 1e-45, 3.0], np.float32)
    y = np.array([3e38, 1e38, np.nan, -np.inf, 1e-45, 4.0], np.float32)
    out = np.zeros((3, len(x)), np.float32)
    binary(x, y, out, len(x), t="f32")
    got = out[1]
    assert got[0] == np.inf and np.isfinite(got[1]) and got[1] == np.float32(np.hypot(2e38, 1e38))
    assert got[2] == np.inf and got[3] == np.inf and got[5] == 5.0
    assert got[4] == np.float32(math.hypot(1e-45, 1e-45))


@kernel(name="test.kmath_constants")
def constants(out: Buf[f64, 8]):
    """Functions of constants fold at compile time (the C library's f64 results)."""
    out[0], out[1], out[2] = kmath.erf(0.5), kmath.expm1(1e-10), kmath.log1p(-0.5)
    out[3], out[4], out[5] = kmath.pow(2.0, 0.5), kmath.hypot(3, 4), kmath.round(-2.5)
    out[6], out[7] = kmath.tanh(0.3), kmath.asin(2.0)


def test_constants_fold_to_what_the_twin_computes():
    got, want = np.zeros(8), np.zeros(8)
    constants(got)
    with np.errstate(all="ignore"):
        constants.py_func(want)
    same_bits(got, want)
    assert got[4] == 5.0 and got[5] == -2.0 and np.isnan(got[7])
    assert got[0] == math.erf(0.5)


def test_int_arguments_are_f64_as_numpy():
    assert kmath.tanh(1).dtype == np.float64 and kmath.hypot(3, 4) == 5.0


def test_math_module_functions_point_at_kmath(tmp_path, monkeypatch):
    src = tmp_path / "asin_kernel.py"
    src.write_text("import math\nfrom cuvil_perception.compile.lang import Buf, f32, kernel\n\n"
                   "@kernel(name='test.kmath_asin_error')\ndef k(x: Buf[f32, 4]):\n"
                   "    x[0] = math.asin(x[1])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import asin_kernel

    with pytest.raises(KernelSourceError) as err:
        asin_kernel.k(np.zeros(4, np.float32))
    assert "asin_kernel.py:6" in str(err.value) and "`kmath.asin(...)`" in str(err.value)


def test_a_module_level_array_is_called_an_array(tmp_path, monkeypatch):
    """The error for ``TAB[i]`` (``TAB`` a module-level numpy array) used to call it a static
    tuple."""
    src = tmp_path / "table_kernel.py"
    src.write_text("import numpy as np\nfrom cuvil_perception.compile.lang import Buf, f32, i64, "
                   "kernel\nTAB = np.arange(4, dtype=np.float32)\n\n"
                   "@kernel(name='test.kmath_table_error')\ndef k(x: Buf[f32, 4], i: i64):\n"
                   "    x[0] = TAB[i]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import table_kernel

    with pytest.raises(KernelSourceError) as err:
        table_kernel.k(np.zeros(4, np.float32), 1)
    text = str(err.value)
    assert "table_kernel.py:7" in text and "module-level numpy array" in text
    assert "tuple indexed" not in text
