"""Defects the differential fuzzer (tests/lang_fuzz_run.py) found, one regression test each:
compiled code that disagreed with ``py_func`` or crashed without the kernel's line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import (Buf, bits, boolean, f32, f64, i8, i32, i64, inline,
                                          kernel, kmath, u8)
from cuvil_perception.errors import KernelSourceError

THIS = Path(__file__).resolve()
WIDE = 3000000000  # a module-level constant that does not fit i32
TAB = (3000000000, 1)
PAIR = (1, 2)


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(THIS.read_text().splitlines(), 1)
                if text.rstrip().endswith(marker))


# -- finding 5: an int constant next to an i32 operand was wrapped to 32 bits ----------------
@kernel(name="findings.wide_add")
def wide_add(out: Buf[i64, 1], v: i32):
    out[0] = v + 2147483648  # @add


@kernel(name="findings.wide_mod")
def wide_mod(out: Buf[i64, 1], v: i32):
    out[0] = v % 4294967296  # @mod


@kernel(name="findings.wide_less")
def wide_less(out: Buf[i64, 1], v: i32):
    out[0] = v < 3000000000  # @less


@kernel(name="findings.wide_chain")
def wide_chain(out: Buf[i64, 1], v: i32):
    out[0] = 0 < v == 4294967301  # @chain


@kernel(name="findings.wide_min")
def wide_min(out: Buf[i64, 1], v: i32):
    out[0] = min(v, 1, 3000000000)  # @min


@kernel(name="findings.wide_ifexp")
def wide_ifexp(out: Buf[i64, 1], v: i32):
    out[0] = v if v > 0 else 3000000000  # @ifexp


@kernel(name="findings.wide_shift")
def wide_shift(out: Buf[i64, 1], v: i32):
    out[0] = v << 4294967297  # @shift


@kernel(name="findings.wide_augmented")
def wide_augmented(out: Buf[i64, 1], v: i32):
    w = v
    w *= WIDE  # @augmented
    out[0] = w


@kernel(name="findings.wide_static")
def wide_static(out: Buf[i64, 1], v: i32, *, big: int):
    out[0] = v + big  # @static


@kernel(name="findings.wide_item")
def wide_item(out: Buf[i64, 1], v: i32):
    out[0] = TAB[0] - v  # @item


@kernel(name="findings.wide_bound")
def wide_bound(out: Buf[i64, 1], v: i32, *, big: int):
    x = big
    out[0] = v * x  # @bound


@kernel(name="findings.wide_branch")
def wide_branch(out: Buf[i64, 1], v: i32):
    out[0] = v + (3000000000 if v > 0 else 1)  # @branch


@pytest.mark.parametrize("fn, marker, constant", [
    (wide_add, "@add", 2147483648), (wide_mod, "@mod", 4294967296),
    (wide_less, "@less", 3000000000), (wide_chain, "@chain", 4294967301),
    (wide_min, "@min", 3000000000), (wide_ifexp, "@ifexp", 3000000000),
    (wide_shift, "@shift", 4294967297), (wide_augmented, "@augmented", WIDE),
    (wide_static, "@static", WIDE), (wide_item, "@item", WIDE), (wide_bound, "@bound", WIDE),
    (wide_branch, "@branch", 3000000000),
])
def test_an_int_constant_that_does_not_fit_the_i32_it_joins_is_a_compile_error(fn, marker,
                                                                                constant):
    """``v + 2147483648`` with v an i32 gave -2147483643 (py_func: 2147483653), ``v % 2**32``
    was ``v % 0``, ``v < 3000000000`` False, ``v << 4294967297`` shifted by 1."""
    static = {"big": WIDE} if fn in (wide_static, wide_bound) else {}
    with pytest.raises(KernelSourceError) as err:
        fn(np.zeros(1, np.int64), 5, **static)
    text = str(err.value)
    assert f"{THIS}:{_line(marker)}:" in text
    assert f"the constant {constant} does not fit i32" in text
    assert re.search(r"write `i64\((v|w)\)` to compute in i64", text)


@kernel(name="findings.edges_of_i32")
def edges_of_i32(out: Buf[i64, 4], v: i32):
    out[0] = v + 2147483647
    out[1] = min(v, -2147483648)
    out[2] = v < WIDE - 2 * 1000000000
    out[3] = i64(v) + 2147483648


def test_constants_that_fit_i32_and_a_widened_operand_still_compile():
    got, want = np.zeros(4, np.int64), np.zeros(4, np.int64)
    edges_of_i32(got, -5)
    edges_of_i32.py_func(want, np.int32(-5))
    assert got.tolist() == want.tolist() == [2147483642, -2147483648, 1, 2147483643]


# -- finding 6: a buffer dtype naming a static that is missing or not a type name -----------
@kernel(name="findings.dtype_missing")
def dtype_missing(x: Buf["gty", 4]):  # @missing
    x[0] = 1.0


@kernel(name="findings.dtype_not_a_type")
def dtype_not_a_type(x: Buf["gty", 4], *, gty: str):  # @not_a_type
    x[0] = 1.0


@pytest.mark.parametrize("fn, marker, static, message", [
    (dtype_missing, "@missing", {}, "buffer 'x': its dtype names 'gty', which is not a static "
                                    "parameter; write `*, gty: str` after the run-time"),
    (dtype_not_a_type, "@not_a_type", {"gty": 3}, "buffer 'x': static parameter 'gty' must "
                                                  "name a buffer type"),
])
def test_a_buffer_dtype_naming_no_type_is_a_compile_error_at_the_annotation(fn, marker, static,
                                                                             message):
    """Kernel.spec raised a bare TypeError ("... got None") without the kernel's line."""
    with pytest.raises(KernelSourceError, match=re.escape(message)) as err:
        fn(np.zeros(4, np.float32), **static)
    assert f"{THIS}:{_line(marker)}:" in str(err.value)


# -- finding 1: a store that wraps raised OverflowError uncompiled --------------------------
@kernel(name="findings.store_u8")
def store_u8(x: Buf[u8, 3], v: i32):
    x[0] = v
    x[1], x[2] = v + 1, -v


@kernel(name="findings.store_i8")
def store_i8(x: Buf[i8, 4], y: Buf[i32, 4]):
    for k in range(4):
        x[k] = y[k]
    x[0], x[1] = y[1], y[0]


def test_an_int_store_wraps_uncompiled_as_compiled():
    """``x[0] = v`` into a u8 with v = 300: compiled 44, py_func raised OverflowError (a
    Python int out of range; for i8 a numpy int too: 200 -> -56)."""
    for fn, buf, arg in ((store_u8, np.zeros(3, np.uint8), 300),
                         (store_i8, np.zeros(4, np.int8), np.array([200, -129, 7, 384], np.int32))):
        got, want = buf.copy(), buf.copy()
        fn(got, arg)
        fn.py_func(want, arg)
        assert got.tolist() == want.tolist()
    assert got.tolist() == [127, -56, 7, -128]  # (y[1], y[0], then 7 and 384)


# -- finding 3: an f32 scalar parameter was a Python float (f64) uncompiled -------------------
@kernel(name="findings.scalar_params")
def scalar_params(x: Buf[f32, 1], count: Buf[i64, 1], a: f32, w: i32):
    x[0] = a * a
    for _ in bits(w):
        count[0] += 1


def test_scalar_arguments_take_their_declared_types_uncompiled():
    """f32 a = 0.1: compiled float32(0.1) * float32(0.1) = 0.010000001, py_func computed
    0.1 * 0.1 in f64 and stored 0.01; bits(w) of an i32 -1 counted 64 bits uncompiled."""
    got, want = (np.zeros(1, np.float32), np.zeros(1, np.int64)), \
        (np.zeros(1, np.float32), np.zeros(1, np.int64))
    scalar_params(*got, 0.1, -1)
    scalar_params.py_func(*want, 0.1, -1)
    assert got[0][0] == want[0][0] == np.float32(0.1) * np.float32(0.1)
    assert got[1][0] == want[1][0] == 32


# -- finding 2: arithmetic on comparisons (documented difference) ------------------------------
@kernel(name="findings.bool_arithmetic")
def bool_arithmetic(x: Buf[i64, 2], out: Buf[i64, 6]):
    out[0] = (x[0] > 0) + (x[1] > 0)
    out[1] = ~(x[0] > 0)
    out[2] = -(x[0] > 0)
    out[3] = i64(x[0] > 0) + i64(x[1] > 0)
    out[4] = ~i64(x[0] > 0)
    out[5] = -i64(x[0] > 0)


def test_arithmetic_on_comparisons_is_a_documented_difference_with_a_workaround():
    """Compiled, a bool counts as an int (2, -2, -1); uncompiled, numpy's bool_ makes ``+`` a
    logical or and ``-`` a TypeError: the docs' table says so and that ``i64(a > 0)`` agrees."""
    x, got = np.array([3, 4]), np.zeros(6, np.int64)
    bool_arithmetic(x, got)
    assert got.tolist() == [2, -2, -1] * 2
    doc = (THIS.parents[1] / "docs" / "kernel-language.md").read_text()
    assert "| arithmetic on a comparison: `(a > 0) + (b > 0)`" in doc
    assert "write `i64(a > 0) + i64(b > 0)` and both give 2" in doc
    with pytest.raises(TypeError):
        bool_arithmetic.py_func(x, np.zeros(6, np.int64))


# -- finding 4: a constant tuple where a number is needed crashed constant folding ------------
@kernel(name="findings.tuple_cast")
def tuple_cast(x: Buf[f64, 2]):
    x[0] = i32(PAIR)  # @cast


@kernel(name="findings.tuple_static_cast")
def tuple_static_cast(x: Buf[f64, 2], *, pair: tuple):
    x[0] = f64(pair)  # @static_cast


@kernel(name="findings.tuple_negate")
def tuple_negate(x: Buf[f64, 2]):
    x[0] = -PAIR  # @negate


@kernel(name="findings.tuple_abs")
def tuple_abs(x: Buf[f64, 2]):
    x[0] = abs((1, 2))  # @abs


@kernel(name="findings.tuple_max")
def tuple_max(x: Buf[f64, 2]):
    x[0] = max(1, PAIR)  # @max


@kernel(name="findings.tuple_compare")
def tuple_compare(x: Buf[f64, 2]):
    x[0] = 1.5 >= PAIR  # @compare


@kernel(name="findings.tuple_isnan")
def tuple_isnan(x: Buf[f64, 2]):
    if kmath.isnan(PAIR):  # @isnan
        x[0] = 1.0


@pytest.mark.parametrize("fn, marker, name", [
    (tuple_cast, "@cast", "PAIR"), (tuple_static_cast, "@static_cast", "pair"),
    (tuple_negate, "@negate", "PAIR"), (tuple_abs, "@abs", "(1, 2)"),
    (tuple_max, "@max", "PAIR"), (tuple_compare, "@compare", "PAIR"),
    (tuple_isnan, "@isnan", "PAIR"),
])
def test_a_constant_tuple_where_a_number_is_needed_is_a_compile_error_naming_it(fn, marker,
                                                                                name):
    """``i32(PAIR)`` was 'IR generation failed: TypeError: only 0-dimensional arrays can be
    converted to Python scalars' without a location; ``-(1, 2)``, ``abs``, ``max``, ``>=``
    and ``kmath.isnan`` the same (then Python's TypeError at the line, not naming the tuple)."""
    static = {"pair": (1, 2)} if fn is tuple_static_cast else {}
    with pytest.raises(KernelSourceError) as err:
        fn(np.zeros(2, np.float64), **static)
    text = str(err.value)
    line = THIS.read_text().splitlines()[_line(marker) - 1]
    column = line.index(name, line.index("(" if fn is tuple_isnan else "=")) + 1
    assert f"{THIS}:{_line(marker)}:{column}:" in text
    assert f"`{name}` is a tuple, not a number; write one element of it, `{name}[k]`" in text


# -- a chained comparison skipped a writing helper uncompiled only (seed 101818) -----------
@inline
def _mark(x):
    x[1] = 7.0
    return 1.0


@kernel
def chained_with_a_writing_helper(x: Buf[f32, 2], a: f32, b: f32):
    if a < 0.0 < _mark(x) < b:
        x[0] = 1.0


def test_a_chained_comparison_calls_a_helper_only_when_the_links_before_it_hold():
    # Every operand was evaluated compiled (one branch-free and): with a = 1.0, _mark wrote
    # x[1] = 7.0 compiled and not uncompiled, as Python skips the rest of a false chain.
    for a, b in ((1.0, 2.0), (-1.0, 2.0), (-1.0, 0.5)):
        compiled, uncompiled = np.zeros(2, np.float32), np.zeros(2, np.float32)
        chained_with_a_writing_helper(compiled, a, b)
        chained_with_a_writing_helper.py_func(uncompiled, a, b)
        assert compiled.tolist() == uncompiled.tolist(), (a, b)
    assert uncompiled.tolist() == [0.0, 7.0]


# -- an annotated local is converted compiled only (documented difference) -----------------
@kernel
def annotated_locals(out: Buf[f64, 4]):
    b: f32 = 0.1
    a: boolean = 3
    out[0], out[1] = b, a
    c = f32(0.1)
    d = boolean(3)
    out[2], out[3] = c, d


def test_an_annotation_converts_compiled_only_as_documented():
    row = "| an annotated local, `b: f32 = 0.1`, `a: boolean = 3` | converted to the declared type"
    assert row in (Path(__file__).parents[1] / "docs" / "kernel-language.md").read_text()
    compiled, uncompiled = np.zeros(4), np.zeros(4)
    annotated_locals(compiled)
    annotated_locals.py_func(uncompiled)
    f32_tenth = float(np.float32(0.1))
    assert compiled.tolist() == [f32_tenth, 1.0, f32_tenth, 1.0]
    assert uncompiled.tolist() == [0.1, 3.0, f32_tenth, 1.0]  # the casts agree in both
