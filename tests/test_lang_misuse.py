"""Kernel-language misuse the differential fuzzer's mutant campaign found crashing the compiler
(tests/lang_fuzz_run.py --mutants): each is now a `KernelSourceError` at the kernel's line, or
compiles with Python's meaning, never an internal error or an LLVM dump."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cuvil_perception.compile.lang import Buf, f32, f64, i32, i64, kernel, simd
from test_lang_simd import assert_compile_error

THIS = Path(__file__)
TAB = (1, 2, 3, 4)


@kernel
def float_vector_and(x: Buf[f32, "n"], out: Buf[f32, "n"], *, n: int):
    out[0:8] = x[0:8] & x[0:8]  # marker: float-and


@kernel
def float_vector_xor_assign(x: Buf[f64, "n"], *, n: int):
    v = simd.load(x, 0, 4)
    v ^= simd.load(x, 4, 4)  # marker: float-xor
    simd.store(x, 0, v)


@kernel
def copy_into_constant(x: Buf[i32, "n"], *, n: int):
    simd.copy(TAB, 1, x, 0, 4)  # marker: copy-into-constant


@kernel
def copy_from_constant(x: Buf[i32, "n"], *, n: int):
    simd.stream_copy(x, 0, TAB, 0, 4)  # marker: copy-from-constant


def test_bitwise_operators_on_float_vectors_are_a_compile_error():
    # They were `and <8 x float>`: "invalid IR: LLVM IR parsing error" with no kernel line.
    assert_compile_error(float_vector_and, "float-and", "operator & on Vec[f32, 8]", THIS)
    assert_compile_error(float_vector_xor_assign, "float-xor", "operator ^ on Vec[f64, 4]",
                         THIS)


def test_a_copy_to_or_from_a_constant_is_a_compile_error():
    # Copying into a module-level tuple was "AttributeError: 'Const' object has no attribute
    # 'ty'"; from one, it said the first argument must be a buffer.
    assert_compile_error(copy_into_constant, "copy-into-constant",
                         "the first argument of a simd call must be a buffer", THIS)
    assert_compile_error(copy_from_constant, "copy-from-constant",
                         "the third argument (the source) of a simd call must be a buffer", THIS)


@kernel
def abs_of_comparisons(out: Buf[i64, 3], k: i64, y: f64):
    out[0] = abs(k > 0)
    out[1] = abs(y < 0.0) + abs(k)
    out[2] = abs(not k)


def test_abs_of_a_comparison_is_an_int_as_in_python():
    # It was an AssertionError inside llvmlite (a select of an i1 and an i64).
    for k, y in ((3, -1.0), (0, 2.0), (-5, 0.0)):
        got, want = np.zeros(3, np.int64), np.zeros(3, np.int64)
        abs_of_comparisons(got, k, y)
        abs_of_comparisons.py_func(want, k, y)
        assert got.tolist() == want.tolist() == [abs(k > 0), abs(y < 0.0) + abs(k), abs(not k)]
