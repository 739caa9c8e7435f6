"""`and` / `or` in kernels: operands that are cheap and pure are evaluated and joined without
branches (compile/lang/logic_lower.py, found comparing with numba's IR: benchmarks/vs_numba.py),
anything that loads or calls stays short-circuit, and compiled == uncompiled either way."""

from __future__ import annotations

import numpy as np

from cuvil_perception.compile.lang import Buf, f32, i32, i64, inline, kernel
from cuvil_perception.compile.render_ir import render


@inline
def positive(x):
    return x > 0.0


@kernel(name="test.logic_cheap")
def cheap(a: Buf[f32, "n"], b: Buf[f32, "n"], k: Buf[i32, "n"], out: Buf[i32, "n", 4], *,
          n: int):
    for i in range(n):
        x, y, j = a[i], b[i], k[i]
        out[i, 0] = x >= 0.0 and x < f32(n) and y >= -1.0 and y < 1.0
        out[i, 1] = x != x or y * 2.0 > 1.0 or j & 3 == 1
        out[i, 2] = bool((j > 2 and x) or (not y and -j))  # floats and ints (NaN is true)
        out[i, 3] = j < 0 or (x > y and i32(x) + j * 2 > 3)


@kernel(name="test.logic_guard", debug=True)
def guard(x: Buf[f32, "n"], n: i64, at: i64) -> i64:
    """Reads x[at] only when at < n, and calls the helper only when the first link holds."""
    hits = 0
    if at < n and x[at] > 0.0:
        hits += 1
    if at >= 0 or positive(x[at]):
        hits += 2
    return hits


def test_cheap_operands_compiled_equal_uncompiled():
    rng = np.random.default_rng(0)
    n = 512
    a = rng.uniform(-3, n + 3, n).astype(np.float32)
    b = rng.uniform(-2, 2, n).astype(np.float32)
    a[::17], b[::13], a[::29] = np.nan, np.inf, 0.0
    k = rng.integers(-5, 9, n).astype(np.int32)
    got, want = np.zeros((n, 4), np.int32), np.zeros((n, 4), np.int32)
    cheap(a, b, k, got, n=n)
    with np.errstate(invalid="ignore"):
        cheap.py_func(a, b, k, want, n=n)
    assert np.array_equal(got, want)
    assert got[:, 0].any() and not got[:, 0].all()


def test_cheap_chain_has_no_short_circuit_blocks_and_loads_keep_them():
    assert "bool.rhs" not in render(cheap.spec(n=8))
    assert "bool.rhs" in render(guard.spec())


def test_guarded_load_is_not_speculated():
    x = np.ones(4, np.float32)
    assert guard(x, 4, 4) == 2  # a bounds-checked build: x[4] is never read
    assert guard(x, 4, 0) == 3
    assert guard.py_func(x, 4, 4) == 2
