"""Vector values in the kernel language (``Vec[T, n]`` and the `simd` value operations): each
construct compiled == uncompiled (bitwise) on random inputs, each misuse a compile error at the
kernel's own line, and the bounds-checked build on vector loads, stores and lanes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from cuvil_perception.compile.lang import (Buf, Vec, boolean, f32, f64, i32, i64, inline, kernel,
                                           kmath, simd, u8)
from cuvil_perception.errors import KernelIndexError, KernelSourceError
from test_lang import line_of as lang_line_of

THIS = Path(__file__).resolve()
RNG = np.random.default_rng(21)


def line_of(marker: str) -> int:
    return lang_line_of(marker, THIS)


@inline
def clipped(v, lo):
    return simd.max(v, lo)


@kernel
def float_vectors(x: Buf[f32, "n"], y: Buf[f32, "n"], out: Buf[f32, 9, "n"],
                  red: Buf[f32, "n", 8], k: i64, *, n: int):
    """Elementwise, lanes and reductions, 16 lanes at a time."""
    total: Vec[f32, 16] = simd.splat(f32(0.0), 16)
    for i in range(0, n, 16):
        a = simd.load(x, i, 16)
        b = simd.load(y, i, 16)
        simd.store(out, i, a + b * 2.0 - 1)
        simd.store(out, n + i, (a - b) / simd.splat(y[i], 16))
        simd.store(out, 2 * n + i, simd.select(a > b, a, -b))
        simd.store(out, 3 * n + i, simd.min(a, b))
        simd.store(out, 4 * n + i, clipped(a, f32(0.25)))
        simd.store(out, 5 * n + i, kmath.sqrt(a * a + 1.0))
        simd.store(out, 6 * n + i, simd.select((a < b) | (a != a), f32(1.0), f32(0.0)))
        simd.store(out, 7 * n + i, simd.insert(a, 3, b[5]))
        c = a
        c += b  # a new value: `a` keeps its lanes
        simd.store(out, 8 * n + i, c - a)
        total += a
        red[i, 0] = simd.reduce_add(a)
        red[i, 1] = simd.reduce_max(a)
        red[i, 2] = simd.reduce_min(simd.shuffle(a, (15, 2, 9, 4, 4, 0, 11)))
        red[i, 3] = a[k] + a[-1]
        red[i, 4] = f32(simd.any(a > 2.0)) + f32(simd.all(a > -9.0)) * 2.0
        red[i, 5] = simd.reduce_add(total)
        red[i, 6] = simd.reduce_max(simd.shuffle(b, (1, 2, 3))) + simd.slice(a, 9, 4)[3]
        red[i, 7] = simd.reduce_add(kmath.fma(a, b, simd.splat(f32(0.5), 16)))


@kernel
def int_vectors(x: Buf[i32, "n"], y: Buf[i32, "n"], out: Buf[i32, 6, "n"], red: Buf[i64, 3],
                *, n: int):
    big = simd.splat(i32(-2**31), 8)
    low = simd.splat(i32(2**31 - 1), 8)
    total = simd.splat(i32(0), 8)
    for i in range(0, n, 8):
        a = simd.load(x, i, 8)
        b = simd.load(y, i, 8)
        simd.store(out, i, a * b + 3)
        simd.store(out, n + i, (a & b) | (a ^ ~b))
        simd.store(out, 2 * n + i, -a)
        simd.store(out, 3 * n + i, simd.select(a >= b, a - b, b - a))
        simd.store(out, 4 * n + i, simd.max(a, b))
        simd.store(out, 5 * n + i, simd.select(a == b, i32(1), i32(0)))
        big = simd.max(big, a)
        low = simd.min(low, a)
        total += a
    red[0] = simd.reduce_max(big)
    red[1] = simd.reduce_min(low)
    red[2] = simd.reduce_add(total)


@kernel
def odd_lanes(x: Buf[f64, "n"], out: Buf[f64, 4], *, n: int):
    """Odd lane counts: the reduction tree pads its upper half with the identity."""
    v = simd.load(x, 0, 7)
    out[0] = simd.reduce_add(v)
    out[1] = simd.reduce_max(v)
    out[2] = simd.reduce_min(v)
    out[3] = simd.reduce_add(simd.load(x, 7, 5) * v[6])


@kernel
def streamed(x: Buf[f32, "n"], out: Buf[f32, "n"], *, n: int):
    for i in range(0, n, 16):
        simd.stream_store(out, i, simd.load(x, i, 16) * 3.0)
    simd.fence()


@kernel
def vector_casts(x: Buf[f32, "n"], ints: Buf[i32, "n"], wide: Buf[i64, "n"],
                 back: Buf[f64, "n"], flags: Buf[i32, "n"], *, n: int):
    for i in range(0, n, 8):
        v = simd.load(x, i, 8)
        simd.store(ints, i, i32(v))
        simd.store(wide, i, i64(v))
        simd.store(back, i, f64(abs(v)) + f64(i32(v)))
        simd.store(flags, i, i32(boolean(v)) + abs(simd.load(ints, i, 8)))


def _run_both(k, inputs: list, outputs: list, *scalars, **static):
    """Compiled and uncompiled on copies of the same outputs; returns both sets."""
    got = [o.copy() for o in outputs]
    want = [o.copy() for o in outputs]
    k(*inputs, *got, *scalars, **static)
    k.py_func(*inputs, *want, *scalars, **static)
    return got, want


def test_float_vectors_compiled_equal_uncompiled_bitwise():
    n = 64
    x = RNG.normal(0, 2, n).astype(np.float32)
    y = RNG.normal(0, 2, n).astype(np.float32)
    x[5], y[17] = np.nan, np.nan  # NaN lanes: comparisons, select, min/max and the reductions
    for k in (0, 7, 15):
        got, want = _run_both(float_vectors, [x, y],
                              [np.zeros((9, n), np.float32), np.zeros((n, 8), np.float32)], k,
                              n=n)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g[..., :7], w[..., :7])  # NaN == NaN here
        np.testing.assert_allclose(got[1][:, 7], want[1][:, 7], rtol=1e-6)  # fma: one rounding
    rows = got[1][::16]
    a = x[:16]
    assert rows[0, 3] == a[15] + a[15]
    np.testing.assert_array_equal(got[0][8], (x + y) - x)  # `c += b` left `a` as it was
    np.testing.assert_array_equal(got[0][7][:16], np.where(np.arange(16) == 3, y[5], a))


def test_int_vectors_wrap_and_reduce():
    n = 32
    x = RNG.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    y = RNG.integers(-50, 50, n).astype(np.int32)
    y[:4] = x[:4]
    got, want = _run_both(int_vectors, [x, y], [np.zeros((6, n), np.int32),
                                                np.zeros(3, np.int64)], n=n)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert list(got[1][:2]) == [x.max(), x.min()]
    assert got[1][2] == np.int32(x.sum(dtype=np.int64) & 0xFFFFFFFF)  # wraps as i32
    np.testing.assert_array_equal(got[0][0], x * y + 3)


def test_vector_casts_truncate_and_saturate_like_scalar_casts():
    x = np.array([1.9, -1.9, np.nan, 3e9, -3e9, np.inf, -np.inf, 2.0**31, -(2.0**31), 0.0,
                  -0.0, 0.5, 7.0, -7.5, 1e-30, 65536.7], np.float32)
    outputs = [np.zeros(16, np.int32), np.zeros(16, np.int64), np.zeros(16),
               np.zeros(16, np.int32)]
    got, want = _run_both(vector_casts, [x], outputs, n=16)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    imax, imin = 2**31 - 1, -2**31
    assert list(got[0][:9]) == [1, -1, 0, imax, imin, imax, imin, imax, imin]
    assert got[1][3] == int(np.float32(3e9)) and got[1][5] == 2**63 - 1
    assert list(got[3][:4]) == [2, 2, 1, imin]  # NaN is true; 1 + abs(imax) wraps


def test_odd_lane_reductions_follow_the_documented_tree():
    x = RNG.normal(0, 1e3, 12)
    got, want = _run_both(odd_lanes, [x], [np.zeros(4)], n=12)
    np.testing.assert_array_equal(got[0], want[0])
    v = x[:7]  # the tree: 7 lanes -> (0+4, 1+5, 2+6, 3) -> ((0+4)+(2+6), (1+5)+3) -> one
    tree = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + v[3])
    assert got[0][0] == tree and got[0][1] == v.max() and got[0][2] == v.min()


def aligned(n: int, shift: int = 0) -> np.ndarray:
    """n zero f32 starting ``shift`` elements after a 64-byte boundary."""
    raw = np.zeros(n + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + shift
    return raw[start:start + n]


def test_stream_store_writes_aligned_lines():
    x = RNG.normal(size=64).astype(np.float32)
    got, want = aligned(64), aligned(64)
    streamed(x, got, n=64)
    streamed.py_func(x, want, n=64)
    np.testing.assert_array_equal(got, x * np.float32(3.0))
    np.testing.assert_array_equal(got, want)
    module = ir.Module()
    streamed.spec(n=64).build(module, "f", **streamed.spec(n=64).static)
    text = str(module)
    assert "!nontemporal" in text and "align 64" in text
    with pytest.raises(ValueError, match="not 64-byte aligned"):
        streamed.py_func(x, aligned(64, 1), n=64)
    with pytest.raises(KernelIndexError, match="index 4 out of range for axis 0 of "
                       "'stream_store alignment: address mod 64 of out'"):
        streamed(x, aligned(64, 1), n=64, debug=True)


def test_vectors_are_values_uncompiled():
    v = simd.load(np.arange(4, dtype=np.float32), 0, 4)
    w = v
    w += 1.0
    assert list(v) == [0, 1, 2, 3] and list(w) == [1, 2, 3, 4]
    with pytest.raises(TypeError, match="simd.insert"):
        v[0] = 5.0
    with pytest.raises(IndexError, match="out of range"):
        simd.load(np.zeros(4, np.float32), 2, 4)


# -- errors point at the kernel's line ---------------------------------------------------------
def _bad_kernels():
    @kernel
    def lanes_mix(x: Buf[f32, "n"], *, n: int):
        simd.store(x, 0, simd.load(x, 0, 16) + simd.load(x, 0, 8))  # marker: lanes-mix

    @kernel
    def type_mix(x: Buf[f32, "n"], k: Buf[i32, "n"], *, n: int):
        simd.store(x, 0, simd.load(x, 0, 8) * simd.load(k, 0, 8))  # marker: type-mix

    @kernel
    def scalar_mix(x: Buf[f32, "n"], s: f64, *, n: int):
        simd.store(x, 0, simd.load(x, 0, 8) * s)  # marker: scalar-mix

    @kernel
    def as_number(x: Buf[f32, "n"], *, n: int):
        x[0] = simd.load(x, 0, 8)  # marker: as-number

    @kernel
    def store_type(x: Buf[f32, "n"], k: Buf[i32, "n"], *, n: int):
        simd.store(k, 0, simd.load(x, 0, 8))  # marker: store-type

    @kernel
    def lane_range(x: Buf[f32, "n"], *, n: int):
        x[0] = simd.load(x, 0, 8)[8]  # marker: lane-range

    @kernel
    def annotated(x: Buf[f32, "n"], *, n: int):
        acc: Vec[f32, 16] = simd.splat(f32(0.0), 16)
        acc = simd.load(x, 0, 8)  # marker: annotated

    @kernel
    def bytes_load(x: Buf[u8, "n"], *, n: int):
        v = simd.load(x, 0, 16)  # marker: u8-load  # noqa: F841

    @kernel
    def not_mask(x: Buf[f32, "n"], *, n: int):
        v = simd.load(x, 0, 8)
        simd.store(x, 0, simd.select(v, v, v))  # marker: not-mask

    @kernel
    def floor_div(x: Buf[f32, "n"], *, n: int):
        simd.store(x, 0, simd.load(x, 0, 8) // 2.0)  # marker: floor-div

    @kernel
    def run_time_lanes(x: Buf[f32, "n"], m: i64, *, n: int):
        simd.store(x, 0, simd.load(x, 0, m))  # marker: run-time-lanes

    @kernel
    def too_many(x: Buf[f32, "n"], *, n: int):
        acc: Vec[f32, 512] = simd.splat(f32(0.0), 16)  # marker: too-many  # noqa: F841

    @kernel
    def bad_shuffle(x: Buf[f32, "n"], *, n: int):
        x[0] = simd.shuffle(simd.load(x, 0, 4), (0, 4))[0]  # marker: bad-shuffle

    @kernel
    def bad_slice(x: Buf[f32, "n"], *, n: int):
        x[0] = simd.slice(simd.load(x, 0, 4), 2, 3)[0]  # marker: bad-slice

    @kernel
    def mask_sum(x: Buf[f32, "n"], *, n: int):
        x[0] = simd.reduce_add(simd.load(x, 0, 4) > 0.0)  # marker: mask-sum

    return {
        "lanes_mix": (lanes_mix, "lanes-mix", "Vec[f32, 16] and Vec[f32, 8] in one operation"),
        "type_mix": (type_mix, "type-mix", "Vec[f32, 8] and Vec[i32, 8]"),
        "scalar_mix": (scalar_mix, "scalar-mix", "a f64 scalar with a Vec[f32, 8]; write a cast"),
        "as_number": (as_number, "as-number", "is a Vec[f32, 8] where a number is needed"),
        "store_type": (store_type, "store-type", "storing a Vec[f32, 8] into i32 buffer 'k'"),
        "lane_range": (lane_range, "lane-range", "lane 8 of a Vec[f32, 8]"),
        "annotated": (annotated, "annotated", "'acc' is Vec[f32, 16] (from line"),
        "u8_load": (bytes_load, "u8-load", "a vector load from u8 buffer 'x'"),
        "not_mask": (not_mask, "not-mask", "simd.select needs a mask first"),
        "floor_div": (floor_div, "floor-div", "operator // on Vec[f32, 8]"),
        "run_time_lanes": (run_time_lanes, "run-time-lanes", "must be a compile-time int"),
        "too_many": (too_many, "too-many", "lane count must be an int 1..256"),
        "bad_shuffle": (bad_shuffle, "bad-shuffle", "static tuple of lanes in [0, 4)"),
        "bad_slice": (bad_slice, "bad-slice", "constant lanes inside the Vec[f32, 4]"),
        "mask_sum": (mask_sum, "mask-sum", "a reduction of a mask; write simd.any"),
    }


@pytest.mark.parametrize("case", sorted(_bad_kernels()))
def test_vector_misuse_is_a_compile_error_at_its_line(case):
    assert_compile_error(*_bad_kernels()[case])


def assert_compile_error(k, marker: str, text: str, path: Path = THIS) -> None:
    """Building ``k`` (n=16) fails at the line of ``path`` marked ``marker``, saying ``text``."""
    spec = k.spec(n=16)
    with pytest.raises(KernelSourceError) as info:
        spec.build(ir.Module(), "f", **spec.static)
    message = str(info.value)
    assert message.startswith(f"{path}:{lang_line_of('marker: ' + marker, path)}:"), message
    assert text in message, message


# -- bounds-checked builds -----------------------------------------------------------------------
@kernel(debug=True)
def checked_vectors(x: Buf[f32, "n"], at: i64, lane: i64, *, n: int) -> f32:
    v = simd.load(x, at, 8)  # marker: checked-load
    return v[lane]  # marker: checked-lane


def test_bounds_checked_build_covers_vector_loads_and_lanes():
    x = np.arange(16, dtype=np.float32)
    assert checked_vectors(x, 8, 7, n=16) == 15.0
    with pytest.raises(KernelIndexError) as info:
        checked_vectors(x, 9, 0, n=16)
    assert f"{THIS}:{line_of('marker: checked-load')}" in str(info.value)
    assert "index 9 out of range for axis 0 of 'x (the flat start of 8 elements)' (extent 9)" \
        in str(info.value)
    with pytest.raises(KernelIndexError) as info:
        checked_vectors(x, 0, 8, n=16)
    assert f"{THIS}:{line_of('marker: checked-lane')}" in str(info.value)
    assert "index 8 out of range for axis 0 of 'v' (extent 8)" in str(info.value)


@kernel(debug=True)
def checked_open_store(x: Buf[f32, None], at: i64):
    simd.store(x, at, simd.splat(f32(1.0), 4))  # marker: open-store


def test_bounds_checked_vector_access_names_the_run_and_checks_an_open_extent():
    """A debug build said "index 5 out of range for axis 0 of 'x' (extent 5)" for a load of 4
    at 5 of 8 elements (the extent it prints is the last valid start, the buffer's was not
    named), and checked nothing on a buffer of unknown extent: a store at -4 wrote before it."""
    x = np.zeros(8, np.float32)
    with pytest.raises(KernelIndexError) as info:
        checked_vectors(x, 1, 0, n=8)
    assert "index 1 out of range for axis 0 of 'x (the flat start of 8 elements)' (extent 1)" \
        in str(info.value)
    checked_open_store(x, 4)
    assert x.tolist() == [0.0] * 4 + [1.0] * 4
    with pytest.raises(KernelIndexError) as info:
        checked_open_store(x, -4)
    assert f"{THIS}:{line_of('marker: open-store')}" in str(info.value)
    assert "index -4 out of range for axis 0 of 'x (the flat start of 4 elements)' (extent " \
        "unknown)" in str(info.value)


def test_head_cells_kernel_runs_uncompiled_too():
    """The package's vector kernel (pillars.head_cells) compiled == uncompiled on a small map."""
    from cuvil_perception.ops.pillars.kernel_head_cells import head_cells

    cells, parts, jb, jd, width = 30, (8, 4), 42, 12, 64
    cls = RNG.normal(-5, 1.5, (cells, 18)).astype(np.float32)
    cls[0, :3] = [np.nan, 9.0, 9.0]  # a NaN first logit: that anchor never passes
    feats = [RNG.normal(0, 1, (c, cells)).astype(np.float32) for c in parts]
    table = np.array([f.ctypes.data for f in feats], np.uint64)
    weights = RNG.normal(0, 0.2, (sum(parts), width)).astype(np.float32)
    bias = RNG.normal(0, 0.2, width).astype(np.float32)
    picks = [[a * 3 + k for a in range(6)] for k in range(3)]  # 6 anchors x 3 classes
    static = dict(cells=cells, groups=18, picks=picks, parts=parts, jb=jb, jd=jd, gate=-2.2,
                  width=width)
    outs = [[np.zeros((cells, jb), np.float32), np.zeros((cells, jd), np.float32),
             np.zeros(cells, np.int32)] for _ in range(2)]
    n = head_cells(cls, table, weights, bias, *outs[0], **static)
    assert 0 < n < cells and n == head_cells.py_func(cls, table, weights, bias, *outs[1], **static)
    np.testing.assert_array_equal(outs[0][2], outs[1][2])
    for got, want in zip(outs[0][:2], outs[1][:2]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # kmath.fma uncompiled: f64
