"""Region stores (`compile/lang/region_lower.py`): slice stores on several axes, on fewer
axes than the buffer has, with run-time bounds or more than 256 lanes, and copies between
buffers, lowered to loops. Compiled, uncompiled (`py_func`, numpy's own slice stores) and
numpy agree; shape mismatches and other misuse are compile errors naming file:line; a
bounds-checked build catches run-time bounds and shapes that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f32, f64, i32, i64, kernel
from cuvil_perception.errors import KernelIndexError, KernelSourceError


@kernel(name="test.regions_fill")
def fills(img: Buf[f32, 64, 300], cube: Buf[i32, 3, 4, 5], flat: Buf["t", 1000], *, t: str):
    """Whole-buffer and multi-axis fills of constant shapes (300 and 1000 lanes: no limit)."""
    img[:, :] = -1.0
    img[10:20, 100:300:7] = 2.5
    cube[:] = 7
    cube[1] = -3
    cube[2, 1:3] = 9
    flat[0:1000] = 200
    flat[10:900:7] = 3
    flat[5:9] += 1


@pytest.mark.parametrize("t", ["u8", "f64", "i16"])
def test_fills_of_constant_shapes(t):
    dtype = {"u8": np.uint8, "f64": np.float64, "i16": np.int16}[t]
    outs = [(np.zeros((64, 300), np.float32), np.zeros((3, 4, 5), np.int32),
             np.zeros(1000, dtype)) for _ in range(3)]
    fills(*outs[0], t=t)
    fills.py_func(*outs[1], t=t)
    img, cube, flat = outs[2]
    img[:, :] = -1.0
    img[10:20, 100:300:7] = 2.5
    cube[:] = 7
    cube[1] = -3
    cube[2, 1:3] = 9
    flat[0:1000] = 200
    flat[10:900:7] = 3
    flat[5:9] += 1
    for got, twin, want in zip(*outs):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(twin, want)


@kernel(name="test.regions_runtime")
def runtime(img: Buf[i32, "h", "w"], out: Buf[f32, "n"], h: i64, w: i64, n: i64, a: i64):
    """Run-time extents and bounds, an `op=` on a region, a scalar computed at run time."""
    img[:] = 7
    img[1:h - 1, 2:w:3] += 5
    img[a, :] = h * 10
    out[:] = f32(a) * 0.5
    out[a:n - a] -= 1.0


@pytest.mark.parametrize("h, w, n, a", [(9, 40, 10, 2), (3, 1, 5, 0), (2, 700, 1, 1)])
def test_run_time_bounds(h, w, n, a):
    got = (np.zeros((h, w), np.int32), np.zeros(n, np.float32))
    twin = (np.zeros((h, w), np.int32), np.zeros(n, np.float32))
    runtime(*got, h, w, n, a)
    runtime.py_func(*twin, h, w, n, a)
    img, out = np.zeros((h, w), np.int32), np.zeros(n, np.float32)
    img[:] = 7
    img[1:h - 1, 2:w:3] += 5
    img[a, :] = h * 10
    out[:] = a * 0.5
    out[a:n - a] -= 1.0
    for g, t, want in zip(got, twin, (img, out)):
        np.testing.assert_array_equal(g, want)
        np.testing.assert_array_equal(t, want)


@kernel(name="test.regions_copy")
def copies(a: Buf[f64, 10, 12], b: Buf[f32, 6, 20], c: Buf[f32, "h", "w"], h: i64, w: i64):
    """Copies: a block, a row into a column, a shifted run-time block (other dtypes convert
    as element stores do)."""
    a[2:5, 1:3] = b[0:3, 4:6]
    a[0:6, 11] = b[:, 19]
    a[6:9, :] = b[3:6, 8:20]
    c[:, 1:w] = b[0:h, 0:w - 1]
    c[0:h, 0] += b[0:h, 19]


def test_copies():
    rng = np.random.default_rng(0)
    b = rng.normal(size=(6, 20)).astype(np.float32)
    got = (np.zeros((10, 12)), np.zeros((4, 9), np.float32))
    twin = (np.zeros((10, 12)), np.zeros((4, 9), np.float32))
    copies(got[0], b, got[1], 4, 9)
    copies.py_func(twin[0], b, twin[1], 4, 9)
    a, c = np.zeros((10, 12)), np.zeros((4, 9), np.float32)
    a[2:5, 1:3] = b[0:3, 4:6]
    a[0:6, 11] = b[:, 19]
    a[6:9, :] = b[3:6, 8:20]
    c[:, 1:9] = b[0:4, 0:8]
    c[0:4, 0] += b[0:4, 19]
    for g, t, want in zip(got, twin, (a, c)):
        np.testing.assert_array_equal(g, want)
        np.testing.assert_array_equal(t, want)


@kernel(name="test.regions_checked", debug=True)
def checked(dst: Buf[f32, "h", "w"], src: Buf[f32, "h", "w"], h: i64, w: i64, a: i64, b: i64):
    """A bounds-checked build: run-time bounds and copy shapes are checked."""
    dst[0:h, a:b] = src[0:h, 0:w - 1]


def test_debug_build_checks_run_time_bounds_and_shapes():
    x, y = np.zeros((3, 8), np.float32), np.ones((3, 8), np.float32)
    checked(x, y, 3, 8, 1, 8)
    assert (x[:, 1:] == 1).all() and (x[:, 0] == 0).all()
    with pytest.raises(KernelIndexError, match="test_lang_regions.py"):
        checked(x, y, 3, 8, 2, 8)  # 6 columns into 7
    with pytest.raises(KernelIndexError, match="test_lang_regions.py"):
        checked(x, y, 3, 8, 2, 9)  # past the extent
    with pytest.raises((IndexError, ValueError)):
        checked.py_func(x, y, 3, 8, 2, 8)  # (numpy: cannot broadcast 7 into 6)


MISUSE = {
    "shape": ("dst[0:3, 0:4] = src[0:3, 0:5]", "shape mismatch: `dst[0:3, 0:4]` is (3, 4) "
              "but `src[0:3, 0:5]` is (3, 5)"),
    "axes": ("dst[0:3, 0:4] = src[0, 0:4]", "shape mismatch"),
    "same": ("dst[1:4, :] = dst[0:3, :]", "a copy within one buffer ('dst')"),
    "vector": ("dst[:, :] = src[0, 0:4] * 2.0", "stored into `dst[:, :]`"),
    "float": ("idx[:, :] = 1.5", "storing f64 into i32 buffer 'idx'"),
    "range": ("dst[0:300, :] = 0.0", "slice `0:300` out of range for axis 0 of 'dst' (extent 8)"),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_misuse_is_a_compile_error_at_its_line(case, tmp_path, monkeypatch):
    line, message = MISUSE[case]
    src = tmp_path / f"region_{case}.py"
    src.write_text("from cuvil_perception.compile.lang import Buf, f32, i32, kernel\n\n"
                   f"@kernel(name='test.region_misuse_{case}')\n"
                   "def k(dst: Buf[f32, 8, 8], src: Buf[f32, 8, 8], idx: Buf[i32, 8, 8]):\n"
                   f"    {line}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(f"region_{case}")
    with pytest.raises(KernelSourceError) as err:
        module.k(np.zeros((8, 8), np.float32), np.zeros((8, 8), np.float32),
                 np.zeros((8, 8), np.int32))
    assert f"region_{case}.py:5" in str(err.value) and message in str(err.value)


@kernel(name="test.regions_vector_path")
def vector_path(x: Buf[f32, 4, 8], v: Buf[f32, 8]):
    """One axis, constant bounds, <= 256 lanes: still one vector (tuples and vectors work)."""
    x[0, :] = v[:]
    x[1, 0:3] = (1.0, 2.0, 3.0)
    x[2, :] = v[:] * 2.0


def test_one_axis_small_slices_stay_vectors():
    v = np.arange(8, dtype=np.float32)
    got, twin = np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32)
    vector_path(got, v)
    vector_path.py_func(twin, v)
    np.testing.assert_array_equal(got, twin)
    assert list(got[1, :3]) == [1, 2, 3] and (got[2] == 2 * v).all()
