"""Slices as Python takes them, compiled == uncompiled: an ``op=`` on a slice reads its lanes
before its value is evaluated, the indices of a subscript are evaluated left to right (a helper
that writes what a later index reads), ``None`` bounds, a stepped stop past the extent; a
negative bound is a compile error saying what to write; and a debug build names a local array
or a view as the user did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import (Buf, address, f32, i32, i64, inline, kernel, local,
                                           simd, view)
from cuvil_perception.errors import KernelIndexError
from test_lang import line_of as lang_line_of
from test_lang_simd import assert_compile_error

THIS = Path(__file__).resolve()


def both(k, *args, **static) -> tuple[list, list]:
    """The array arguments after running ``k`` compiled and uncompiled, each on its own copy."""
    runs = []
    for fn in (k, k.py_func):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        fn(*copies, **static)
        runs.append([a for a in copies if isinstance(a, np.ndarray)])
    return runs[0], runs[1]


def assert_same(compiled: list, uncompiled: list) -> None:
    """Bit for bit."""
    for got, want in zip(compiled, uncompiled):
        np.testing.assert_array_equal(got, want)
        assert got.tobytes() == want.tobytes()


# -- op= on a slice: the lanes read first ---------------------------------------------------------
@inline
def overwrite_row(x, i):
    """Writes the lanes the caller's ``op=`` is about to update; returns 1."""
    x[i, 0:4] = 95.0
    return f32(1.0)


@inline
def overwrite_column(x, j):
    x[0:2, j] = 95.0
    return f32(1.0)


@kernel(name="test.slice_aug_reads_first")
def aug_reads_first(rows: Buf[f32, 2, 8], cols: Buf[f32, 2, 8], moved: Buf[f32, 2, 8],
                    out: Buf[f32, 2, 8], i: i64, k: i64):
    rows[i, 0:4] += overwrite_row(rows, i)
    cols[0:2, k] -= overwrite_column(cols, k)
    moved[i, k:k + 4] *= overwrite_row(moved, i)
    scratch = local(f32, 2, 8)
    scratch[i, 0:4] += overwrite_row(scratch, i)
    out[i, :] = scratch[i, :]


def test_slice_op_assign_reads_its_lanes_before_the_value():
    """Python reads ``x[i, 0:4]`` before it calls the helper that writes 95 there: the sum is
    the old lanes + 1 (numpy's read, a view, would see the 95s: 96)."""
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    compiled, uncompiled = both(aug_reads_first, x, x, x, np.zeros((2, 8), np.float32), 1, 2)
    assert_same(compiled, uncompiled)
    rows, cols, moved, out = compiled
    assert list(rows[1, :4]) == [9, 10, 11, 12]
    assert list(cols[:, 2]) == [1, 9]
    assert list(moved[1]) == [95, 95, 10, 11, 12, 13, 14, 15]  # lanes 2..5, two of them 95
    assert list(out[1, :4]) == [1, 1, 1, 1]


@kernel(name="test.slice_aug_tuple")
def aug_tuple(x: Buf[f32, 4, 4], counts: Buf[i32, 2, 4], s: f32):
    for i in range(4):
        x[i, 0:2] += (0.1, s)
        x[i, 2:4] *= (s, 0.3)
    counts[0, 1:3] -= (7, 2)
    counts[1, 0:4:2] += (i32(5), 6)


def test_a_tuple_on_the_right_of_a_slice_op_assign_is_the_lanes():
    """The tuple's items are lanes of the buffer's type (0.1 is f32(0.1)), in both modes:
    numpy alone would add it in f64 and round twice."""
    x = np.random.default_rng(3).uniform(-1, 1, (4, 4)).astype(np.float32)
    counts = np.arange(8, dtype=np.int32).reshape(2, 4)
    compiled, uncompiled = both(aug_tuple, x, counts, 0.7)
    assert_same(compiled, uncompiled)
    want = x.copy()
    want[:, 0:2] += np.array((0.1, 0.7), np.float32)
    want[:, 2:4] *= np.array((0.7, 0.3), np.float32)
    np.testing.assert_array_equal(compiled[0], want)
    assert compiled[1].tolist() == [[0, -6, 0, 3], [9, 5, 12, 7]]


# -- indices left to right ------------------------------------------------------------------------
@inline
def move_to_column_4(w):
    """Row 1, after pointing ``w[0]`` (the column a later index reads) at 4."""
    w[0] = 4
    return 1


@kernel(name="test.slice_indices_in_order")
def indices_in_order(x: Buf[f32, 2, 8], stored: Buf[f32, 2, 8], updated: Buf[f32, 2, 8],
                     cols: Buf[f32, 8, 2], w: Buf[i64, 1], out: Buf[f32, 6]):
    out[0:4] = x[move_to_column_4(w), w[0]:w[0] + 4]
    w[0] = 0
    stored[move_to_column_4(w), w[0]:w[0] + 4] = 100.0
    w[0] = 0
    updated[move_to_column_4(w), w[0]:w[0] + 4] += 100.0
    w[0] = 0
    out[4:6] = cols[w[0]:w[0] + 4:2, move_to_column_4(w)]  # the slice first: column 0, rows 0, 2


def test_subscript_indices_are_evaluated_left_to_right():
    """``x[f(w), w[0]:w[0] + 4]``: the helper runs first, so the slice starts at the column it
    set (4), in a read, a store and an op= target; a slice before the helper reads w[0] first."""
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    cols = np.arange(16, dtype=np.float32).reshape(8, 2)
    compiled, uncompiled = both(indices_in_order, x, x, x, cols, np.zeros(1, np.int64),
                                np.zeros(6, np.float32))
    assert_same(compiled, uncompiled)
    _, stored, updated, _, _, out = compiled
    assert list(out) == [12, 13, 14, 15, 1, 5]
    assert list(stored[1]) == [8, 9, 10, 11, 100, 100, 100, 100]
    assert list(updated[1]) == [8, 9, 10, 11, 112, 113, 114, 115]


# -- slice forms Python accepts -------------------------------------------------------------------
END = None  # a module-level name for "to the end"


@kernel(name="test.slice_none_bounds")
def none_bounds(x: Buf[f32, 2, 8], out: Buf[f32, 2, 8], k: i64):
    out[0, None:4] = x[1, 4:None]
    out[0, 4:END:None] = x[0, None:4:END]
    out[1, None:None:2] += x[1, k:k + 4:None]


def test_none_as_a_slice_bound_or_step_is_left_out():
    """``None:4`` is ``:4``, ``4:None`` is ``4:`` and ``a:b:None`` is ``a:b``, as in Python
    (compiled refused them as 'a NoneType constant'), also through a module-level name."""
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    compiled, uncompiled = both(none_bounds, x, np.zeros((2, 8), np.float32), 0)
    assert_same(compiled, uncompiled)
    assert compiled[1].tolist() == [[12, 13, 14, 15, 0, 1, 2, 3], [8, 0, 9, 0, 10, 0, 11, 0]]


@kernel(name="test.slice_stop_past_extent")
def stop_past_extent(x: Buf[f32, 4, 8], out: Buf[f32, 4, 8]):
    out[0, 0:4] = x[1, 1:9:2]  # lanes 1, 3, 5, 7: the stop 9 is past the extent, no lane is
    out[1, 1:9:2] = x[2, 0:4]
    out[2, 3:9:4] += x[3, 0:2]
    out[3, 0:2] = x[1:5:2, 7]


@kernel(debug=True)
def checked_stop_past(x: Buf[f32, "n", "m"], n: i64, m: i64) -> f32:
    return simd.reduce_add(x[0, 1:9:2])  # marker: stop-past


def _past_the_end():
    @kernel
    def past_the_end(x: Buf[f32, "n", 8], *, n: int):
        x[0, 1:10:2] = 1.0  # marker: past-the-end

    return past_the_end


def test_a_stepped_slice_may_stop_past_the_extent_when_its_lanes_do_not():
    """``1:9:2`` of 8 is lanes 1, 3, 5, 7, as numpy (compiled refused it as `1:9` out of
    range); ``1:10:2`` has lane 9 and stays a compile error, a run-time extent a debug check."""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    compiled, uncompiled = both(stop_past_extent, x, np.zeros((4, 8), np.float32))
    assert_same(compiled, uncompiled)
    out = compiled[1]
    assert list(out[0, :4]) == [9, 11, 13, 15]
    assert list(out[1]) == [0, 16, 0, 17, 0, 18, 0, 19]
    assert list(out[2]) == [0, 0, 0, 24, 0, 0, 0, 25]
    assert list(out[3, :2]) == [15, 31]
    assert_compile_error(_past_the_end(), "past-the-end", "slice `1:10:2` out of range for "
                         "axis 1 of 'x' (extent 8", path=THIS)
    assert checked_stop_past(x, 4, 8) == 1 + 3 + 5 + 7
    with pytest.raises(KernelIndexError) as info:
        checked_stop_past(x.reshape(-1)[:28].reshape(4, 7), 4, 7)
    assert f"{THIS}:{lang_line_of('marker: stop-past', THIS)}" in str(info.value)
    assert "index 7 out of range for axis 1 of 'x' (extent 7)" in str(info.value)


# -- debug builds name local arrays and views -----------------------------------------------------
@kernel(debug=True)
def checked_names(x: Buf[f32, 2, 8], out: Buf[f32, 8], k: i64, which: i64):
    scratch = local(f32, 2, 8)
    rows = view(address(x), f32, 2, 8)
    if which == 0:
        out[0:4] = scratch[1, k:k + 4]  # marker: local-slice
    elif which == 1:
        scratch[1, k] = 1.0  # marker: local-element
    elif which == 2:
        out[0:4] = rows[1, k:k + 4]  # marker: view-slice
    else:
        out[0:4] = simd.load(rows, k, 4)  # marker: view-load


@pytest.mark.parametrize("which, at, marker, text", [
    (0, 6, "local-slice", "index 6 out of range for axis 1 of 'scratch (the start of a slice "
                          "of 4)' (extent 5)"),
    (1, 8, "local-element", "index 8 out of range for axis 1 of 'scratch' (extent 8)"),
    (2, 6, "view-slice", "index 6 out of range for axis 1 of 'rows (the start of a slice of 4)'"),
    (3, 13, "view-load", "index 13 out of range for axis 0 of 'rows (the flat start of 4 "
                         "elements)' (extent 13)"),
])
def test_a_debug_build_names_local_arrays_and_views_as_written(which, at, marker, text):
    """The message names the variable (it said 'local@6', 'view@7': the call's line)."""
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(KernelIndexError) as info:
        checked_names(x, np.zeros(8, np.float32), at, which)
    assert f"{THIS}:{lang_line_of('marker: ' + marker, THIS)}" in str(info.value)
    assert text in str(info.value)


# -- negative bounds --------------------------------------------------------------------------
def _negative_bounds():
    @kernel
    def from_the_end(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:4] = x[1, -4:]  # marker: from-the-end

    @kernel
    def both_negative(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:3] = x[1, -4:-1]  # marker: both-negative

    @kernel
    def stepped_stop(x: Buf[f32, "n", 8], *, n: int):
        x[1, 0:-1:2] = 1.0  # marker: stepped-stop

    return {"from-the-end": (from_the_end, "`4:8`"), "both-negative": (both_negative, "`4:7`"),
            "stepped-stop": (stepped_stop, "`0:7:2`")}


@pytest.mark.parametrize("marker", ["from-the-end", "both-negative", "stepped-stop"])
def test_a_negative_slice_bound_is_a_compile_error_saying_what_to_write(marker):
    """``x[1, -4:]`` counts from the end in Python; a kernel does not (it was 'slice `-4:8`
    out of range', with no word of why): the error says so and gives the bounds from 0.
    Uncompiled, numpy would count from the end: an IndexError, as for a lane past the end."""
    k, instead = _negative_bounds()[marker]
    assert_compile_error(k, marker, f"kernels do not count from the end as Python does; write "
                         f"{instead} instead", path=THIS)
    with pytest.raises(IndexError, match="a negative bound on axis 1 counts from the end"):
        k.py_func(np.zeros((2, 8), np.float32), n=2)
