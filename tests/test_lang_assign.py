"""Chained assignment in the kernel language (`a = b = v`): v is evaluated once and bound to each
target left to right, as in Python; names, constants, buffer elements and tuples as targets. An
`op=` evaluates its target once too (an element, a row or a column slice)."""

from __future__ import annotations

import numpy as np

from cuvil_perception.compile.lang import Buf, f32, i64, inline, kernel


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


@inline
def bump(calls):
    """calls[0], then counts the call: an index with a side effect."""
    calls[0] += 1
    return calls[0] - 1


@kernel(name="test.aug_target_once")
def aug_once(flat: Buf[f32, 8], rows: Buf[f32, 4, 8], cols: Buf[f32, 8, 4], calls: Buf[i64, 1]):
    flat[bump(calls)] += 1.0
    rows[bump(calls), 0:4] += 2.0
    cols[0:8:2, bump(calls)] -= 3.0


def test_op_assign_evaluates_its_target_once():
    """Python reads and writes the element ``bump`` picks once; evaluating the index again for
    the store would read one element and write the next."""
    results = []
    for run in (aug_once, aug_once.py_func):
        arrays = [np.zeros(8, np.float32), np.zeros((4, 8), np.float32),
                  np.zeros((8, 4), np.float32), np.zeros(1, np.int64)]
        run(*arrays)
        results.append(arrays)
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
    flat, rows, cols, calls = results[0]
    assert calls[0] == 3 and flat.tolist() == [1.0] + [0.0] * 7
    assert np.all(rows[1, :4] == 2.0) and np.count_nonzero(rows) == 4
    assert np.all(cols[0::2, 2] == -3.0) and np.count_nonzero(cols) == 4
