"""Chained assignment in the kernel language (`a = b = v`): v is evaluated once and bound to each
target left to right, as in Python; names, constants, buffer elements and tuples as targets. An
`op=` evaluates its target once too (an element, a row or a column slice)."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f32, i64, inline, kernel, unroll
from cuvil_perception.errors import KernelSourceError


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


PAIRS = ((1, 2), (3, 4))


@kernel(name="test.unpack_constant_tuples")
def unpack_pairs(out: Buf[f32, 4]):
    first, second = PAIRS  # each name a compile-time tuple, as in Python
    out[0], out[1] = first
    out[2], out[3] = second[1], second[0]


def test_unpacking_a_tuple_of_tuples_binds_each_name():
    """``a, b = PAIRS`` binds tuples once (it was refused as 'assigned more than once')."""
    for run in (unpack_pairs, unpack_pairs.py_func):
        out = np.zeros(4, np.float32)
        run(out)
        assert out.tolist() == [1.0, 2.0, 4.0, 3.0]


def test_a_tuple_name_bound_twice_names_both_lines():
    def twice(out: Buf[f32, 4]):
        first, second = PAIRS
        out[0] = first[0]
        first, second = PAIRS
        out[1] = second[1]

    line = twice.__code__.co_firstlineno
    with pytest.raises(KernelSourceError, match=f"assigned more than once to 'first' \\(lines "
                                                f"{line + 1}, {line + 3}\\)"):
        kernel(name="test.tuple_twice")(twice)(np.zeros(4, np.float32))


@kernel(name="test.bound_in_an_unrolled_if")
def width_of(x: Buf[i64, 1], *, sizes: tuple) -> i64:
    start = width = 0
    for size in sizes:  # unrolled: one copy per size
        if x[0] >= start:  # known at run time only
            width = size
        start += size
    return width


@kernel(name="test.bound_once_in_an_unrolled_if")
def level_of(x: Buf[i64, 1], *, sizes: tuple) -> i64:
    start = 0
    for level, size in enumerate(sizes):
        if x[0] >= start:
            found = level  # bound once in the source, once per copy at run time
            top = start
        start += size
    return found * 1000 + top


def test_a_name_bound_under_a_run_time_if_of_an_unrolled_loop_is_a_variable():
    """The copy that ran last decides (it was the constant of the last copy compiled: 8, 2)."""
    for value, width, level, top in ((0, 4, 0, 0), (5, 6, 1, 4), (12, 8, 2, 10)):
        x = np.array([value], np.int64)
        for run in (width_of, width_of.py_func):
            assert run(x, sizes=(4, 6, 8)) == width
        for run in (level_of, level_of.py_func):
            assert run(x, sizes=(4, 6, 8)) == level * 1000 + top


def test_a_tuple_bound_under_a_run_time_if_of_an_unrolled_loop_says_why():
    def pick_pair(x: Buf[i64, 1], out: Buf[f32, 2]):
        for level in unroll(2):
            if x[0] > level:
                pair = PAIRS[level]
        out[0] = pair[0]

    with pytest.raises(KernelSourceError, match="a tuple assigned to 'pair' in an `if`, `while` "
                                                "or run-time loop inside an unrolled loop"):
        kernel(name="test.tuple_in_unrolled_if")(pick_pair)(np.zeros(1, np.int64),
                                                             np.zeros(2, np.float32))
