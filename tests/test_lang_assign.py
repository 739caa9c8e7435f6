"""Chained assignment in the kernel language (`a = b = v`): v is evaluated once and bound to each
target left to right, as in Python; names, constants, buffer elements and tuples as targets."""

from __future__ import annotations

import numpy as np

from cuvil_perception.compile.lang import Buf, f32, i64, kernel


@kernel(name="test.chained_assign")
def sums(x: Buf[f32, "n", 2], out: Buf[f32, 6], counts: Buf[i64, 2], *, n: int):
    low = high = f32(0.0)  # two accumulators of one type (f32, not f64)
    below = above = 0
    half = quarter = 0.25 * 2  # constants both
    for i in range(n):
        low += x[i, 0]
        high += x[i, 1]
        below += x[i, 0] < half
        above += x[i, 1] > quarter
    out[0] = out[1] = low  # buffer elements
    (out[2], out[3]) = (out[4], out[5]) = high, low * high  # tuples
    counts[0], counts[1] = below, above


def test_chained_assignment_binds_every_target():
    x = np.random.default_rng(5).uniform(0, 1, (37, 2)).astype(np.float32)
    got, want = np.zeros(6, np.float32), np.zeros(6, np.float32)
    got_counts, want_counts = np.zeros(2, np.int64), np.zeros(2, np.int64)
    sums(x, got, got_counts, n=37)
    sums.py_func(x, want, want_counts, n=37)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_counts, want_counts)
    low, high = np.float32(0), np.float32(0)
    for a, b in x:  # float32 accumulation, element by element
        low, high = np.float32(low + a), np.float32(high + b)
    assert list(got) == [low, low, high, low * high, high, low * high]
    assert list(got_counts) == [np.sum(x[:, 0] < 0.5), np.sum(x[:, 1] > 0.5)]
