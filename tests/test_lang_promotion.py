"""The arithmetic promotion table (`compile/lang/promotion.py`): the compiled code and the
uncompiled twin follow it for every pair of operand types (values chosen so that the type
shows in the bits: an int 2**24 + 1 rounds in f32, 0.1 differs in f32 and f64), and
docs/kernel-language.md shows the same table."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f32, f64, i32, i64, kernel, promotion
from cuvil_perception.compile.lang.types import BOOL, F32, F64, I32, I64

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "kernel-language.md")


def test_docs_show_the_table():
    with open(DOCS, encoding="utf-8") as f:
        assert promotion.table_markdown() in f.read()


def test_table_rules():
    assert promotion.join(F32, I64) == F32 and promotion.join(I32, I64) == I64
    assert promotion.join(F32, F64) == F64 and promotion.join(BOOL, I32) == I32
    assert promotion.operands(BOOL, BOOL, False, False, True) == I64
    assert promotion.operands(BOOL, BOOL, False, False, False) == BOOL
    assert promotion.operands(I32, F64, False, True, True) == F64  # i32 * 0.5
    assert promotion.operands(F32, F64, False, True, True) == F32  # f32 * 0.5
    assert promotion.operands(I32, I64, False, True, True) == I32  # i32 + 1
    assert promotion.power(F32, F64, False, True) == F32 and promotion.power(F32, F64) == F64
    assert promotion.power(I64, I64) == F64 and promotion.true_divide(I32, BOOL)
    assert promotion.math_argument([F32, I32], [False, False]) == F64
    assert promotion.math_argument([F32, F64], [False, True]) == F32


@kernel(name="test.promotion_pairs")
def pairs(fx: Buf[f32, 2], dx: Buf[f64, 2], ix: Buf[i32, 2], lx: Buf[i64, 2],
          out: Buf[f64, 40], s: f32, d: f64, k: i32, n: i64):
    """Every pair of strong f32 / f64 / i32 / i64 operands (parameters and buffer elements),
    through + * / ** and an op= on a name; stored in f64 so the operation's type shows."""
    out[0], out[1], out[2] = s * n, fx[0] + lx[0], fx[1] * ix[0]
    out[3], out[4], out[5] = s / k, s ** d, k ** s
    out[6], out[7], out[8] = d * s, n / k, lx[1] - fx[0]
    out[9], out[10], out[11] = ix[1] * s, s + d, dx[0] * ix[0]
    out[12], out[13] = fx[0] // k, fx[1] % n
    acc = s
    acc += n
    out[14] = acc
    acc2 = d
    acc2 *= s
    out[15] = acc2
    out[16], out[17] = s * 0.1, k * 0.1
    out[18], out[19] = (fx[0] > 0.0) + s, n ** 2


def test_compiled_and_twin_follow_the_table():
    fx = np.array([16777217.0, 0.1], np.float32)
    dx = np.array([0.1, 0.3])
    ix = np.array([16777217, 3], np.int32)
    lx = np.array([16777219, 2**40 + 1], np.int64)
    args = (np.float32(0.1), 0.1, 16777217, 2**30 + 1)
    got, twin = np.zeros(40), np.zeros(40)
    pairs(fx, dx, ix, lx, got, *args)
    with np.errstate(all="ignore"):
        pairs.py_func(fx, dx, ix, lx, twin, *args)
    np.testing.assert_array_equal(got, twin)
    s, n, k = np.float32(0.1), 2**30 + 1, 16777217
    assert got[0] == float(s * np.float32(n))  # f32 * i64 is f32 (numpy: f64)
    assert got[2] == float(np.float32(0.1) * np.float32(16777217))
    assert got[6] == float(np.float64(s) * 0.1) and got[7] == n / k
    assert got[16] == float(s * np.float32(0.1)) and got[17] == k * 0.1


@pytest.mark.parametrize("a, b", [(np.float32(0.1), np.int64(2**30 + 1)),
                                  (np.int32(16777217), np.float32(3.0)),
                                  (np.bool_(True), np.float32(0.1))])
def test_twin_arith_converts_the_int_to_the_float(a, b):
    for op in ("+", "-", "*", "/", "//", "%", "**"):
        with np.errstate(all="ignore"):
            out = promotion.twin_arith(op, a, b)
        assert type(out) is np.float32, op


def test_twin_arith_leaves_other_operands_to_numpy():
    v = np.arange(3, dtype=np.float32)
    assert promotion.twin_arith("+", 2, 3) == 5 and type(promotion.twin_arith("+", 2, 3)) is int
    assert promotion.twin_arith("*", np.int32(3), np.int64(4)).dtype == np.int64
    assert promotion.twin_arith("+", v, np.float32(1)).dtype == np.float32


@kernel(name="test.promotion_element_op")
def element_op(x: Buf[f32, "m"], idx: Buf[i64, "m"], m: i64, n: i64, k: i32):
    """``x[j] op= v`` with an int ``v``: f32 arithmetic, rounded once, in both modes; the
    index evaluated once."""
    for j in range(m):
        x[j] += n
        x[idx[j]] *= k
        x[j] -= idx[j]


def test_element_op_follows_the_table():
    rng = np.random.default_rng(5)
    x = rng.normal(size=4000).astype(np.float32) * np.float32(3e7)
    idx = rng.integers(0, 4000, 4000)
    got, twin = x.copy(), x.copy()
    element_op(got, idx, 4000, 2**31 + 3, 7)
    element_op.py_func(twin, idx, 4000, 2**31 + 3, 7)
    np.testing.assert_array_equal(got, twin)
