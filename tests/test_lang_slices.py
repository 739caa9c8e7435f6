"""Buffer slices as vector values (``buf[i, a:b]``) and ``simd.iota``: each construct compiled ==
uncompiled (bitwise) on random inputs, a slice read a value in both modes (not a numpy view),
each misuse a compile error at the kernel's own line, and the bounds-checked build."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from cuvil_perception.compile.lang import (Buf, f32, f64, i32, i64, inline, kernel, kmath, local,
                                           simd, u8)
from cuvil_perception.compile.lang import slices
from cuvil_perception.compile.lang.simd import Vector
from cuvil_perception.errors import KernelIndexError, KernelSourceError
from test_lang import line_of as lang_line_of
from test_lang_simd import assert_compile_error

THIS = Path(__file__).resolve()
RNG = np.random.default_rng(12)


def line_of(marker: str) -> int:
    return lang_line_of(marker, THIS)


@inline
def doubled_row(x, i):
    return x[i, :] * 2.0


@inline
def take_next(counter):
    """counter[0], then counts the call (a helper with a side effect)."""
    counter[0] += 1
    return counter[0] - 1


@kernel
def float_slices(x: Buf[f32, "n", 8], y: Buf[f32, "n", 8], out: Buf[f32, "n", 8],
                 red: Buf[f32, "n", 4], n: i64, k: i64):
    """Reads, stores, broadcasts, op= on a slice, local arrays and a run-time start."""
    acc = local(f32, 2, 8)
    acc[1, :] = 0.5
    for i in range(n):
        row = x[i, :]                       # a value: the write below does not change it
        x[i, 0] = 100.0
        acc[0, :] = kmath.fma(row, y[i, 0:8], acc[1, :])
        out[i, :] = acc[0, :] + x[i, :]
        out[i, 2:6] += row[0]
        out[i, 4:] = simd.select(x[i, :4] > y[i, 4:8], x[i, 0:4], -y[i, :4])
        red[i, :2] = simd.slice(doubled_row(y, i), 6, 2)
        red[i, 2] = simd.reduce_add(y[i, k:k + 4])
        red[i, 3] = simd.reduce_max(abs(row))
        y[i, :] = f32(0.0)


@kernel
def int_slices(a: Buf[i32, "n", 16], b: Buf[i64, "n", 4], out: Buf[i32, "n", 16], n: i64):
    for i in range(n):
        out[i, :] = a[i, :] * 3 + simd.iota(i32, 16)
        b[i, :] = b[i, :] + i64(a[i, 0:4]) - simd.iota(i64, 4)
        out[i, 8:12] = 7


@kernel
def chosen_rows(x: Buf[f32, "n", 4], out: Buf[f32, "n", 4], n: i64):
    """simd.select with one bool for every lane (a branch-free whole-vector choice)."""
    for i in range(n):
        out[i, :] = simd.select(x[i, 0] > 0.0, x[i, :], out[i, :] + x[i, :])


@kernel
def float_iota(out: Buf[f64, 5], g: Buf[f32, 3]):
    out[:] = simd.iota(f64, 5) * 0.5
    g[:] = simd.iota(f32, 3) + 1.0


@kernel
def strided_slices(work: Buf[f32, 5, "n"], boxes: Buf[f32, "n", 4], table: Buf[f64, "n", 12],
                   out: Buf[f64, "n", 6], n: i64, k: i64):
    """Columns, steps, tuple stores, rows unpacked into names, a run-time start with a step."""
    for i in range(n):
        work[0:4, i] = boxes[i, :] + 1.0            # a column from a row
        x1, y1, x2, y2 = boxes[i, :]                # numpy unpacks a row
        work[4, i] = (x2 - x1) * (y2 - y1)
        xs, ys = table[i, 0:8:2], table[i, 1:8:2]   # interleaved pairs, split
        out[i, 0:2] = (simd.reduce_min(xs), simd.reduce_max(ys))
        out[i, 2:6] = xs * ys
        table[i, 8:12:2] = (f64(x1), 2.0)           # a tuple's items as lanes
        table[i, k:k + 3:2] = ys[0]                 # a broadcast into every other element
        out[i, ::5] = f64(work[1::3, i])


HALF_X = simd.vector(f64, (0.5, -0.5, -0.5, 0.5))  # a module-level constant vector
MASK = np.array([True, False]).view(simd.Vector)  # not one a kernel can read


@kernel
def corners(boxes: Buf[f32, "n", 7], table: Buf[f64, "n", 8], n: i64):
    """bev_iou.box_table's corners, lanes built from constants and from run-time scalars."""
    for i in range(n):
        x, y, dx = f64(boxes[i, 0]), f64(boxes[i, 1]), f64(boxes[i, 3])
        px = HALF_X * dx
        table[i, 0::2] = x + px
        table[i, 1::2] = simd.vector(f64, (y, y - dx, 1.0, y * 2.0)) + px


def _both(k, arrays: list, *scalars):
    """(compiled, uncompiled) results, each on fresh copies of ``arrays``."""
    got, want = [a.copy() for a in arrays], [a.copy() for a in arrays]
    k(*got, *scalars)
    k.py_func(*want, *scalars)
    return got, want


def test_float_slices_compiled_equal_uncompiled_bitwise():
    n = 9
    x = RNG.normal(0, 3, (n, 8)).astype(np.float32)
    y = RNG.normal(0, 3, (n, 8)).astype(np.float32)
    x[3, 2] = np.nan
    for k in (0, 2, 4):
        got, want = _both(float_slices, [x, y, np.zeros((n, 8), np.float32),
                                         np.zeros((n, 4), np.float32)], n, k)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float32
            np.testing.assert_array_equal(g.view(np.int32), w.view(np.int32))
    out = got[2]  # the row was read before x[i, 0] = 100: a value, not a view
    expect = np.float32(x[:, 0] * y[:, 0] + np.float32(0.5)) + np.float32(100.0)
    np.testing.assert_allclose(out[:, 0], expect, rtol=1e-6)
    assert np.all(got[1] == 0.0)


def test_int_slices_and_iota_compiled_equal_uncompiled():
    n = 5
    a = RNG.integers(-1000, 1000, (n, 16), dtype=np.int32)
    b = RNG.integers(-10**12, 10**12, (n, 4), dtype=np.int64)
    got, want = _both(int_slices, [a, b, np.zeros((n, 16), np.int32)], n)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[2][:, :8], a[:, :8] * 3 + np.arange(8))
    assert np.all(got[2][:, 8:12] == 7)
    got, want = _both(float_iota, [np.zeros(5), np.zeros(3, np.float32)])
    assert list(got[0]) == list(want[0]) == [0, 0.5, 1, 1.5, 2]
    assert list(got[1]) == list(want[1]) == [1, 2, 3]


def test_strided_slices_compiled_equal_uncompiled():
    n = 11
    arrays = [RNG.normal(0, 3, (5, n)).astype(np.float32),
              RNG.normal(0, 3, (n, 4)).astype(np.float32), RNG.normal(0, 3, (n, 12)),
              np.zeros((n, 6))]
    arrays[1][4, 2] = np.nan
    for k in (0, 3, 9):
        got, want = _both(strided_slices, arrays, n, k)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.view(np.int8), w.view(np.int8))
    work, boxes, table, out = got
    np.testing.assert_array_equal(work[:4], arrays[1].T + np.float32(1.0))
    np.testing.assert_array_equal(out[:, 2:5], (arrays[2][:, 0:8:2] * arrays[2][:, 1:8:2])[:, :3])
    np.testing.assert_array_equal(table[:, 8], arrays[1][:, 0])


def test_strided_slices_move_lane_by_lane_and_runs_stay_one_vector():
    module = ir.Module()
    strided_slices.spec().build(module, "f", **strided_slices.spec().static)
    text = str(module)
    assert "load <4 x float>" in text  # boxes[i, :]: a run
    assert "insertelement <4 x double>" in text  # table[i, 0:8:2]: lane by lane
    assert "extractelement <4 x float>" in text  # work[0:4, i] = ...: lane by lane


def test_vectors_of_lanes_and_module_constant_vectors(monkeypatch):
    n = 6
    boxes = RNG.normal(0, 10, (n, 7)).astype(np.float32)
    got, want = _both(corners, [boxes, np.zeros((n, 8))], n)
    np.testing.assert_array_equal(got[1], want[1])
    x, dx = boxes[:, :1].astype(np.float64), boxes[:, 3:4].astype(np.float64)
    np.testing.assert_array_equal(got[1][:, 0::2], x + np.array([0.5, -0.5, -0.5, 0.5]) * dx)
    before = corners.spec().identity()
    monkeypatch.setattr(sys.modules[__name__], "HALF_X", simd.vector(f64, (1.0, 2.0, 3.0, 4.0)))
    got, want = _both(corners, [boxes, np.zeros((n, 8))], n)  # not the code built for the old
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1][:, 0::2], x + np.arange(1.0, 5.0) * dx)
    assert corners.spec().identity() != before


SIGNS = (simd.vector(f64, (1.0, -1.0)), simd.vector(f64, (0.5, 0.25)))
PAIRS = (SIGNS, (simd.vector(i32, (3, 4)), 2.5))  # vectors inside (nested) tuples


@kernel
def paired(out: Buf[f64, 2, 2], ints: Buf[i32, 2]):
    """Module-level vectors inside tuples: indexed, unpacked and looped over."""
    signs = PAIRS[0]
    counts, scale = PAIRS[1]
    out[0, :] = PAIRS[0][1] * scale
    for k, v in enumerate(signs):
        out[1, :] += v * f64(k + 1)
    ints[:] = counts + PAIRS[1][0]


def test_tuples_of_constant_vectors_and_their_identity(monkeypatch):
    got, want = _both(paired, [np.zeros((2, 2)), np.zeros(2, np.int32)])
    np.testing.assert_array_equal(got[0], [[1.25, 0.625], [2.0, -0.5]])
    np.testing.assert_array_equal(got[1], [6, 8])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    before = paired.spec().identity()
    monkeypatch.setattr(sys.modules[__name__], "PAIRS",
                        (SIGNS, (simd.vector(i32, (5, 4)), 2.5)))
    assert paired.spec().identity() != before  # a changed lane inside the tuple: another kernel
    got, want = _both(paired, [np.zeros((2, 2)), np.zeros(2, np.int32)])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1], [10, 8])
    # the same bytes as a 2-d array are another constant, refused (not the 1-d kernel's code)
    same = corners.spec().identity()
    monkeypatch.setattr(sys.modules[__name__], "HALF_X", HALF_X.reshape(2, 2).view(Vector))
    assert corners.spec().identity() != same
    with pytest.raises(KernelSourceError, match="`HALF_X` is a 2-d vector of float64"):
        corners(np.zeros((1, 7), np.float32), np.zeros((1, 8)), 1)


def test_select_of_a_bool_picks_whole_vectors():
    x = RNG.normal(0, 1, (40, 4)).astype(np.float32)
    got, want = _both(chosen_rows, [x, np.ones((40, 4), np.float32)], 40)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1], np.where(x[:, :1] > 0, x, x + 1))


def test_uncompiled_slice_reads_are_values_and_the_source_is_the_users():
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    v = doubled_row(x, 0)
    assert isinstance(v, Vector) and v.dtype == np.float32
    assert "float_slices(x: Buf" in inspect.getsource(float_slices.py_func)
    assert float_slices.py_func.__code__.co_filename == str(THIS)
    assert inspect.unwrap(float_slices.py_func) is not float_slices.py_func
    assert int_slices.py_func.__kwdefaults__ == inspect.unwrap(int_slices.py_func).__kwdefaults__


@kernel
def near_the_end(x: Buf[f32, "n", 8], out: Buf[f32, "n"], n: i64, k: i64, j: i64):
    for i in range(n):
        out[i] = simd.reduce_add(x[i, k:k + 4])  # marker: near-end-read
        x[j:j + 3:2, 0] = 1.0  # marker: near-end-store


def test_uncompiled_slices_past_an_axis_raise_instead_of_clamping():
    """numpy would clamp ``x[i, 5:9]`` to 3 elements (and read ``x[i, -1:3]`` as empty) where
    the compiled kernel takes 4 lanes: uncompiled, a lane outside its axis is an IndexError."""
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    for k in (0, 4):
        got, want = _both(near_the_end, [x, np.zeros(3, np.float32)], 3, k, 0)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
    for k, j, marker, text in (
            (5, 0, "near-end-read", "`x[i, k:k + 4]`: elements 5 to 8 (step 1) out of range for "
             "axis 1 (extent 8)"), (-1, 0, "near-end-read", "elements -1 to 2"),
            (0, 1, "near-end-store", "`x[j:j + 3:2, 0]`: elements 1 to 3 (step 2) out of range "
             "for axis 0 (extent 3)")):
        with pytest.raises(IndexError, match=re.escape(text)) as info:
            near_the_end.py_func(x.copy(), np.zeros(3, np.float32), 3, k, j)
        assert info.traceback[-2].lineno + 1 == line_of(f"marker: {marker}")


def test_constant_folded_slices_are_found_in_the_bytecode():
    """Python 3.14 loads ``x[0, 0:4]``'s index as one constant, with no slice opcode: the
    uncompiled function must still be rebuilt (else its slice reads are numpy views)."""
    def row(x):
        return x[(0, None)]

    code = row.__code__
    assert not slices._has_slices(code)
    folded = tuple((0, slice(0, 4)) if c == (0, None) else c for c in code.co_consts)
    assert slices._has_slices(code.replace(co_consts=folded))


def test_slices_compile_to_one_vector_load_and_store():
    for k, wanted in ((float_iota, ("store <5 x double>", "store <3 x float>")),
                      (int_slices, ("load <16 x i32>", "store <4 x i64>"))):
        module = ir.Module()
        k.spec().build(module, "f", **k.spec().static)
        assert all(w in str(module) for w in wanted)


def _bad_kernels():
    @kernel
    def two_axes(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0] = simd.reduce_add(x[0:2, 0:2])  # marker: two-axes

    @kernel
    def run_time_bounds(x: Buf[f32, "n", 8], a: i64, b: i64, *, n: int):
        x[0, :] = simd.splat(simd.reduce_add(x[0, a:b]), 8)  # marker: run-time-bounds

    @kernel
    def stepped(x: Buf[f32, "n", 8], s: i64, *, n: int):
        x[0, 0:4] = x[0, 0:8:s]  # marker: stepped

    @kernel
    def backwards(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:4] = x[0, 4:0:-1]  # marker: backwards

    @kernel
    def tuple_length(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:3] = (1.0, 2.0)  # marker: tuple-length

    @kernel
    def tuple_item(x: Buf[f32, "n", 8], s: f64, *, n: int):
        x[0, 0:2] = (1.0, s)  # marker: tuple-item

    @kernel
    def unpack_lanes(x: Buf[f32, "n", 8], *, n: int):
        a, b = x[0, 0:3]  # marker: unpack-lanes
        x[1, 0] = a + b

    @kernel
    def column_past_end(x: Buf[f32, 4, 8], *, n: int):
        x[0, 0] = simd.reduce_add(x[0:8:2, 1])  # marker: column-past-end

    @kernel
    def past_end(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:4] = x[0, 6:10]  # marker: past-end

    @kernel
    def huge_bounds(x: Buf[f32, None], *, n: int):
        x[0:2**70] = 1.0  # marker: huge-bounds

    @kernel
    def huge_step(x: Buf[f32, None], *, n: int):
        x[0:2**70:2**68] = 1.0  # marker: huge-step

    @kernel
    def empty(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:4] = x[0, 4:4]  # marker: empty

    @kernel
    def length_mismatch(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:4] = x[0, 0:8]  # marker: length-mismatch

    @kernel
    def element_type(x: Buf[f32, "n", 8], k: Buf[i32, "n", 8], *, n: int):
        x[0, :] = k[0, :] * 2  # marker: element-type (a copy `= k[0, :]` converts)

    @kernel
    def scalar_type(x: Buf[f32, "n", 8], s: f64, *, n: int):
        x[0, :] = s  # marker: scalar-type

    @kernel
    def byte_slice(x: Buf[u8, "n", 8], *, n: int):
        x[0, 0] = simd.reduce_add(x[0, :])  # marker: byte-slice (a store `x[0, :] = 1` works)

    @kernel
    def whole_run_time(x: Buf[f32, "m", "m"], m: i64, *, n: int):
        x[0, 0] = simd.reduce_add(x[0, :])  # marker: whole-run-time

    @kernel
    def slice_as_number(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0] = x[1, 0:8]  # marker: slice-as-number

    @kernel
    def float_start(x: Buf[f32, "n", 8], s: f32, *, n: int):
        x[0, 0] = simd.reduce_add(x[0, s:s + 2])  # marker: float-start

    @kernel
    def bad_vector(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:2] = simd.vector(f32, 2.0)  # marker: bad-vector

    @kernel
    def vector_lane_type(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0:2] = simd.vector(f32, (x[0, 0], f64(1.0)))  # marker: vector-lane-type

    @kernel
    def bool_vector_constant(x: Buf[f32, "n", 8], *, n: int):
        x[0, 0] = simd.reduce_add(MASK)  # marker: bool-vector-constant

    @kernel
    def bad_iota(x: Buf[f32, "n", 8], *, n: int):
        x[0, :] = simd.iota(8, 8)  # marker: bad-iota

    @kernel
    def helper_start(x: Buf[f32, "n", 8], calls: Buf[i64, 1], *, n: int):
        x[0, 0] = x[1, take_next(calls):take_next(calls) + 2][0]  # marker: helper-start

    return {
        "helper_start": (helper_start, "helper-start", "calls helper `take_next` for its start "
                         "and again for its stop"),
        "two_axes": (two_axes, "two-axes", "a slice on more than one axis"),
        "run_time_bounds": (run_time_bounds, "run-time-bounds", "has no compile-time length"),
        "stepped": (stepped, "stepped", "slice step `s`: a step must be a compile-time int"),
        "backwards": (backwards, "backwards", "slice step `-1`: a step must be"),
        "tuple_length": (tuple_length, "tuple-length",
                         "storing 2 values into a slice of 3 f32 ('x')"),
        "tuple_item": (tuple_item, "tuple-item", "a f64 scalar with a Vec[f32, 2]"),
        "unpack_lanes": (unpack_lanes, "unpack-lanes", "cannot unpack a Vec[f32, 3] into 2"),
        "column_past_end": (column_past_end, "column-past-end",
                            "slice `0:8:2` out of range for axis 0 of 'x' (extent 4"),
        "past_end": (past_end, "past-end", "slice `6:10` out of range for axis 1 of 'x'"),
        "empty": (empty, "empty", "slice `4:4` out of range"),
        "huge_bounds": (huge_bounds, "huge-bounds", "slice `0:1180591620717411303424` out of "
                        "range for axis 0 of 'x' (extent run-time"),
        "huge_step": (huge_step, "huge-step", "slice step `2 ** 68`: a step must be"),
        "length_mismatch": (length_mismatch, "length-mismatch",
                            "storing a Vec[f32, 8] into a slice of 4 f32 ('x')"),
        "element_type": (element_type, "element-type", "storing a Vec[i32, 8] into a slice of 8"),
        "scalar_type": (scalar_type, "scalar-type", "a f64 scalar with a Vec[f32, 8]"),
        "byte_slice": (byte_slice, "byte-slice", "a slice of u8 buffer 'x'"),
        "whole_run_time": (whole_run_time, "whole-run-time", "`:` needs a static extent; axis 1"),
        "slice_as_number": (slice_as_number, "slice-as-number", "where a number is needed"),
        "float_start": (float_start, "float-start", "is f32, a slice start must be an int"),
        "bad_iota": (bad_iota, "bad-iota", "simd.iota needs an element type first"),
        "bad_vector": (bad_vector, "bad-vector", "simd.vector needs an element type and a tuple"),
        "vector_lane_type": (vector_lane_type, "vector-lane-type",
                             "a f64 scalar with a Vec[f32, 2]"),
        "bool_vector_constant": (bool_vector_constant, "bool-vector-constant",
                                 "`MASK` is a 1-d vector of bool"),
    }


@pytest.mark.parametrize("case", sorted(_bad_kernels()))
def test_slice_misuse_is_a_compile_error_at_its_line(case):
    assert_compile_error(*_bad_kernels()[case], path=THIS)


@kernel(debug=True)
def checked_slices(x: Buf[f32, "n", "m"], i: i64, at: i64, *, n: int, m: int) -> f32:
    head = simd.reduce_add(x[i, 0:4])  # marker: checked-row
    return head + simd.reduce_add(x[0, at:at + 4])  # marker: checked-start


def test_bounds_checked_build_covers_slices():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    assert checked_slices(x, 2, 4, n=3, m=8) == checked_slices.py_func(x, 2, 4, n=3, m=8)
    with pytest.raises(KernelIndexError) as info:
        checked_slices(x, 3, 0, n=3, m=8)
    assert f"{THIS}:{line_of('marker: checked-row')}" in str(info.value)
    assert "index 3 out of range for axis 0 of 'x' (extent 3)" in str(info.value)
    with pytest.raises(KernelIndexError) as info:
        checked_slices(x, 0, 5, n=3, m=8)
    assert f"{THIS}:{line_of('marker: checked-start')}" in str(info.value)
    assert "index 5 out of range for axis 1 of 'x (the start of a slice of 4)' (extent 5)" in \
        str(info.value)


@kernel(debug=True)
def checked_unknown(x: Buf[f32, None, 4], k: i64, *, n: int) -> f32:
    """Slices on an axis of unknown extent: only a negative index can be caught."""
    return simd.reduce_add(x[k:k + 2, 1]) + simd.reduce_add(x[0:3, 0])  # marker: unknown


@kernel(debug=True)
def checked_steps(x: Buf[f32, "n", "m"], i: i64, n: i64, m: i64) -> f32:
    return simd.reduce_add(x[i, 1:8:3])  # marker: checked-steps


def test_bounds_checked_build_covers_unknown_extents_and_constant_steps():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    assert checked_unknown(x, 2, n=6) == checked_unknown.py_func(x, 2, n=6) == 9 + 13 + 12
    with pytest.raises(KernelIndexError) as info:
        checked_unknown(x, -1, n=6)
    assert f"{THIS}:{line_of('marker: unknown')}" in str(info.value)
    assert "index -1 out of range for axis 0 of 'x (the start of a slice of 2)'" in \
        str(info.value)
    assert checked_steps(x.reshape(3, 8), 1, 3, 8) == 9 + 12 + 15  # lanes 1, 4, 7
    with pytest.raises(KernelIndexError) as info:  # lane 7 of a row of 6
        checked_steps(x.reshape(4, 6), 0, 4, 6)
    assert f"{THIS}:{line_of('marker: checked-steps')}" in str(info.value)
    assert "index 7 out of range for axis 1 of 'x' (extent 6)" in str(info.value)


@kernel(debug=True)
def checked_column(x: Buf[f32, "n", "m"], at: i64, *, n: int, m: int) -> f32:
    return simd.reduce_add(x[at:at + 3:2, 1])  # marker: checked-column


def test_bounds_checked_build_covers_strided_columns():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    assert checked_column(x, 3, n=6, m=4) == checked_column.py_func(x, 3, n=6, m=4) == 13 + 21
    with pytest.raises(KernelIndexError) as info:
        checked_column(x, 4, n=6, m=4)  # rows 4 and 6 of 6
    assert f"{THIS}:{line_of('marker: checked-column')}" in str(info.value)
    assert "index 4 out of range for axis 0 of 'x (the start of a slice of 2)' (extent 4)" in \
        str(info.value)
