"""The kernel language: each construct, Python-semantics corner cases, errors that point at the
kernel's own line, bounds-checked builds, and interpreted == compiled on random inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile import get_kernel
from cuvil_perception.compile.lang import (Buf, f32, f64, i32, i64, inline, kernel, kmath, local,
                                           u8, unroll)
from cuvil_perception.errors import KernelIndexError, KernelSourceError

THIS = Path(__file__).resolve()
RNG = np.random.default_rng(12)


def line_of(marker: str, path: Path = THIS) -> int:
    """1-based line of the first line in ``path`` (this file) containing ``marker``."""
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


# -- kernels under test -----------------------------------------------------------------------
@inline
def clamp01(v):
    if v < 0.0:
        return f32(0.0)
    if v > 1.0:
        return f32(1.0)
    return v


@inline
def argmax_row(m, r, k):
    best: f32 = m[r, 0]
    at = 0
    for c in range(1, k):
        if m[r, c] > best:
            best = m[r, c]
            at = c
    return at, best


@kernel
def int_semantics(a: Buf[i64, "n"], b: Buf[i64, "n"], out: Buf[i64, "n", 6], *, n: int):
    for i in range(n):
        x, y = a[i], b[i]
        out[i, 0] = x // y
        out[i, 1] = x % y
        out[i, 2] = min(x, y)
        out[i, 3] = max(x, y, 0)
        out[i, 4] = abs(x)
        out[i, 5] = (x << 3) ^ (y >> 1) | (x & 7)


@kernel(fastmath=("contract",))
def float_semantics(a: Buf[f32, "n"], b: Buf[f32, "n"], out: Buf[f32, "n", 8], *, n: int):
    for i in range(n):
        x, y = a[i], b[i]
        out[i, 0] = x // y
        out[i, 1] = x % y
        out[i, 2] = kmath.sqrt(abs(x)) + kmath.floor(y) - kmath.ceil(x)
        out[i, 3] = kmath.exp(x)
        out[i, 4] = clamp01(x)
        out[i, 5] = x ** 2 + y / 4
        out[i, 6] = f32(i32(x * 10.0))
        out[i, 7] = kmath.atan2(y, x) + kmath.sin(x) * kmath.cos(y)


@kernel
def control(m: Buf[f32, "rows", "k"], idx: Buf[i32, "rows"], flags: Buf[u8, "rows"],
            rows: i64, *, k: int, limit: float = 0.5) -> i64:
    """argmax per row; counts rows whose best passes; while/break/continue/elif."""
    passed = 0
    for r in range(rows):
        at, best = argmax_row(m, r, k)
        idx[r] = at
        if best > limit and at != 0:
            flags[r] = 2
        elif best > limit:
            flags[r] = 1
        else:
            flags[r] = 0
            continue
        passed += 1
    j = 0
    while True:
        if j >= rows:
            break
        j += 1
    return passed + j - rows


@kernel
def statics(out: Buf[f64, 6], *, grids: tuple, scale: float, mode: int):
    offset = 0
    for h, w in grids:
        out[offset] = h * w * scale
        offset += 1
    acc = local(f64, 3)
    for t in unroll(3):
        acc[t] = t * 1.5
    out[3] = acc[0] + acc[1] + acc[2]
    if mode == 1:
        out[4] = 1.0
    else:
        out[4] = -1.0
    out[5] = 2.5 if mode == 1 else 0.0


@kernel
def early(x: Buf[f32, "n"], n: i64, *, bound: float) -> i64:
    for i in range(n):
        if x[i] > bound:
            return i
    return -1


@kernel(debug=True)
def checked(x: Buf[f32, "n"], n: i64, at: i64) -> f32:
    total: f32 = 0.0
    for i in range(n):
        total += x[i]
    return total + x[at]  # marker: checked-index


# -- constructs and semantics ------------------------------------------------------------------
def _ints(n):
    a = RNG.integers(-1000, 1000, n).astype(np.int64)
    b = RNG.integers(-9, 9, n).astype(np.int64)
    b[b == 0] = 3
    return a, b


def test_integer_ops_have_python_semantics_on_negatives():
    a, b = _ints(257)
    out = np.zeros((257, 6), np.int64)
    int_semantics(a, b, out, n=257)
    ref = np.zeros_like(out)
    int_semantics.py_func(a, b, ref, n=257)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out[:, 0], a // b)
    np.testing.assert_array_equal(out[:, 1], a % b)


def test_integer_overflow_wraps_and_division_by_zero_does_not_trap():
    a = np.array([2**63 - 1, -2**63, 5, -5], np.int64)
    b = np.array([1, -1, 0, 0], np.int64)
    out = np.zeros((4, 6), np.int64)
    int_semantics(a, b, out, n=4)
    assert out[1, 0] == -2**63          # INT_MIN // -1 wraps instead of trapping
    assert list(out[2:, 0]) == [5, -5]  # x // 0 is x (documented), x % 0 is 0
    assert list(out[2:, 1]) == [0, 0]
    assert out[0, 4] == 2**63 - 1 and out[1, 4] == -2**63  # abs(INT_MIN) wraps


def test_float_ops_match_the_interpreted_kernel():
    n = 301
    a = RNG.uniform(-8, 8, n).astype(np.float32)
    b = RNG.uniform(-8, 8, n).astype(np.float32)
    b[np.abs(b) < 0.1] = 0.5
    out = np.zeros((n, 8), np.float32)
    float_semantics(a, b, out, n=n)
    ref = np.zeros_like(out)
    float_semantics.py_func(a, b, ref, n=n)
    np.testing.assert_array_equal(out[:, [0, 1, 4, 6]], ref[:, [0, 1, 4, 6]])
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)
    assert np.all(np.sign(out[:, 1]) * np.sign(b) >= 0)  # % takes the divisor's sign


def test_control_flow_helpers_and_static_params():
    rows, k = 64, 5
    m = RNG.uniform(-1, 1, (rows, k)).astype(np.float32)
    got = [np.zeros(rows, np.int32), np.zeros(rows, np.uint8)]
    want = [np.zeros(rows, np.int32), np.zeros(rows, np.uint8)]
    n = control(m, *got, rows, k=k)
    assert n == control.py_func(m, *want, rows, k=k)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[0], np.argmax(m, axis=1))
    assert control(m, *got, rows, k=k, limit=2.0) == 0


def test_static_tuples_unroll_and_constant_branches():
    out, ref = np.zeros(6), np.zeros(6)
    statics(out, grids=((2, 3), (4, 5), (1, 1)), scale=0.5, mode=1)
    statics.py_func(ref, grids=((2, 3), (4, 5), (1, 1)), scale=0.5, mode=1)
    np.testing.assert_array_equal(out, ref)
    assert list(out) == [3.0, 10.0, 0.5, 4.5, 1.0, 2.5]


def test_early_return_and_specs_per_static_value():
    x = np.array([0.1, 0.2, 0.9, 0.3], np.float32)
    assert early(x, 4, bound=0.5) == 2
    assert early(x, 4, bound=1.0) == -1
    assert early.spec(bound=0.5) != early.spec(bound=1.0)
    assert early.spec(bound=0.5) == early.spec(bound=0.5)
    assert early.spec(bound=0.5).call_args == ("ptr", "i64") and early.spec(bound=0.5).ret == "i64"


def test_kernel_spec_plugs_into_get_kernel_and_releases_the_gil_by_ctypes():
    spec = early.spec(bound=0.5)
    fn = get_kernel(spec)
    x = np.array([0.0, 0.7], np.float32)
    assert fn(x.ctypes.data, 2) == 1
    assert fn is get_kernel(early.spec(bound=0.5))  # memoised


def test_range_loop_is_vectorised(tmp_path, monkeypatch):
    from cuvil_perception.compile import registry

    @kernel(name="test.vec_axpy", fastmath=("contract",))
    def vec_axpy(x: Buf[f32, "n"], y: Buf[f32, "n"], a: f32, *, n: int):
        for i in range(n):
            y[i] += a * x[i]

    monkeypatch.setenv("CUVIL_DUMP_IR", str(tmp_path))
    get_kernel(vec_axpy.spec(n=4096))
    text = next(tmp_path.glob("test.vec_axpy-*.ll")).read_text()
    assert "<16 x float>" in text or "<8 x float>" in text
    registry.clear_memory()


# -- debug builds --------------------------------------------------------------------------------
def test_bounds_checked_build_names_buffer_index_and_line():
    x = np.ones(8, np.float32)
    assert checked(x, 8, 7) == 9.0
    with pytest.raises(KernelIndexError) as info:
        checked(x, 8, 8)
    message = str(info.value)
    assert f"{THIS}:{line_of('marker: checked-index')}" in message
    assert "index 8 out of range for axis 0 of 'x' (extent 8)" in message
    with pytest.raises(KernelIndexError, match="index -1"):
        checked(x, 8, -1)


def test_debug_switch_from_the_environment(monkeypatch):
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1")
    spec = early.spec(bound=0.5)
    assert spec.static["_debug"] is True and spec.args[-1] == "ptr"
    x = np.zeros(3, np.float32)
    assert peek(x, 2, n=3) == 0.0
    with pytest.raises(KernelIndexError, match="index 3 out of range for axis 0 of 'x' "
                       "\\(extent 3\\)"):
        peek(x, 3, n=3)


@kernel
def peek(x: Buf[f32, "n"], at: i64, *, n: int) -> f32:
    return x[at]


# -- errors point at the kernel's source -----------------------------------------------------------
def _bad_kernels():
    @kernel
    def conflict(x: Buf[f32, "n"], *, n: int):
        acc = 0
        for i in range(n):
            acc = x[i]  # marker: type-conflict

    @kernel
    def unsupported(x: Buf[f32, "n"], *, n: int):
        with open("f"):  # marker: with-stmt
            pass

    @kernel
    def np_call(x: Buf[f32, "n"], *, n: int):
        for i in range(n):
            x[i] = np.sqrt(x[i])  # marker: numpy-call

    @kernel
    def rank(x: Buf[f32, "n", 4], *, n: int):
        x[0, 0] = x[1]  # marker: wrong-rank (a store `x[0] = 1.0` fills the row, as numpy)

    @kernel
    def untyped(x, *, n: int):
        pass

    @kernel
    def float_index(x: Buf[f32, "n"], *, n: int):
        x[1.5] = 0.0  # marker: float-index

    @kernel
    def store_float_int(x: Buf[i32, "n"], *, n: int):
        x[0] = 1.5  # marker: float-into-int

    @kernel
    def undefined(x: Buf[f32, "n"], *, n: int):
        x[0] = nope  # noqa: F821  marker: undefined-name

    @kernel
    def no_return(x: Buf[f32, "n"], *, n: int) -> i64:
        x[0] = 1.0  # marker: no-return

    return {"conflict": (conflict, "type-conflict", "declare `acc: f32 = ...`"),
            "with": (unsupported, "with-stmt", "`With` statements are not supported"),
            "numpy": (np_call, "numpy-call", "kmath"),
            "rank": (rank, "wrong-rank", "has 2 axes, indexed with 1"),
            "float_index": (float_index, "float-index", "an index must be an int"),
            "store": (store_float_int, "float-into-int", "storing f64 into i32"),
            "undefined": (undefined, "undefined-name", "name 'nope' is not defined"),
            "no_return": (no_return, "no-return", "without returning a i64")}


@pytest.mark.parametrize("case", sorted(_bad_kernels()))
def test_compile_errors_name_file_line_and_fix(case):
    k, marker, text = _bad_kernels()[case]
    with pytest.raises(KernelSourceError) as info:
        k.spec(n=4).build(__import__("llvmlite").ir.Module(), "f", **k.spec(n=4).static)
    message = str(info.value)
    assert message.startswith(f"{THIS}:{line_of('marker: ' + marker)}:"), message
    assert text in message
    first, shown, caret = message.splitlines()  # file:line:col: ..., the line, a caret
    source = THIS.read_text().splitlines()[line_of("marker: " + marker) - 1]
    column = int(first[len(str(THIS)) + 1:].split(":")[1])
    indent = len(source) - len(source.lstrip())
    assert shown == "    " + source.strip()
    assert caret == "    " + " " * (column - 1 - indent) + "^"


def test_a_compile_error_shows_the_line_and_a_caret_under_the_column():
    """As Triton prints them: ``file:line:col: message``, the source line, a caret."""
    k = _bad_kernels()["undefined"][0]
    with pytest.raises(KernelSourceError) as info:
        k.spec(n=4).build(__import__("llvmlite").ir.Module(), "f", **k.spec(n=4).static)
    line = line_of("marker: undefined-name")
    assert str(info.value).splitlines() == [
        f"{THIS}:{line}:16: in kernel undefined: name 'nope' is not defined; write a parameter, "
        "a static parameter or a module-level constant instead",
        "    x[0] = nope  # noqa: F821  marker: undefined-name",
        "           ^"]


def test_parameter_without_a_type_is_an_error_at_the_def_line():
    k = kernel(lambda_free_untyped)
    with pytest.raises(KernelSourceError, match="parameter 'x' needs a type"):
        k.spec(n=1)


def lambda_free_untyped(x, *, n: int):
    pass


def test_static_parameters_are_checked():
    with pytest.raises(KernelSourceError, match="missing \\['bound'\\]"):
        early.spec()
    with pytest.raises(KernelSourceError, match="unknown \\['bogus'\\]"):
        early.spec(bound=1.0, bogus=2)


def test_wrong_buffer_argument_is_a_clear_type_error():
    with pytest.raises(TypeError, match="'x' must be a C-contiguous float32 array"):
        early(np.zeros(3, np.float64), 3, bound=0.5)
    with pytest.raises(TypeError, match="'x' has shape \\(3,\\), the kernel expects \\(4,\\)"):
        early(np.zeros(3, np.float32), 4, bound=0.5)


@kernel
def casts(x: Buf[f32, "n"], out: Buf[i32, "n"], wide: Buf[i64, "n"], *, n: int):
    for i in range(n):
        out[i] = i32(x[i])
        wide[i] = i64(x[i])


def test_float_to_int_casts_truncate_and_saturate():
    x = np.array([1.9, -1.9, np.nan, 3e9, -3e9, np.inf, -np.inf, 2.0**31, -(2.0**31)], np.float32)
    out, wide = np.zeros(9, np.int32), np.zeros(9, np.int64)
    casts(x, out, wide, n=9)
    imax, imin = 2**31 - 1, -2**31
    assert list(out) == [1, -1, 0, imax, imin, imax, imin, imax, imin]
    assert list(wide[:5]) == [1, -1, 0, int(np.float32(3e9)), -int(np.float32(3e9))]
    ref_out, ref_wide = np.zeros_like(out), np.zeros_like(wide)
    casts.py_func(x, ref_out, ref_wide, n=9)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(wide, ref_wide)


def test_kernel_language_specs_emit_cross_objects():
    from cuvil_perception.compile import emit_object

    obj = emit_object(early.spec(bound=0.5), "aarch64-linux-gnu")
    assert obj[:4] == b"\x7fELF" and obj[18] == 183  # e_machine = EM_AARCH64


def test_source_digest_is_part_of_the_identity():
    spec = early.spec(bound=0.5)
    assert spec.source == early.source_digest() and len(spec.source) == 24
    assert spec.source in spec.identity()
