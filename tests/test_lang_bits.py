"""The kernel language's bit counts (`kmath.ctz`, `kmath.popcount`): compiled == interpreted ==
numpy on i32 / i64 / u64 values, the zero case, constants folded, and the error on a float."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, i32, i64, kernel, kmath, u64
from cuvil_perception.errors import KernelSourceError


@kernel(name="test.bit_counts")
def bit_counts(words: Buf[u64, "n"], small: Buf[i32, "n"], out: Buf[i64, "n", 4], *, n: int):
    for k in range(n):
        w = words[k]  # a u64 element loads as i64 with the same bits
        out[k, 0], out[k, 1] = kmath.ctz(w), kmath.popcount(w)
        out[k, 2], out[k, 3] = kmath.ctz(small[k]), kmath.popcount(small[k]) + kmath.ctz(8)


def _cases(n: int = 64):
    rng = np.random.default_rng(3)
    words = rng.integers(0, 2**63, n, dtype=np.uint64) << rng.integers(0, 40, n).astype(np.uint64)
    words[:4] = [0, 1, 2**63, 2**64 - 1]
    small = rng.integers(-2**31, 2**31, n).astype(np.int32)
    small[:4] = [0, -1, -2**31, 1 << 30]
    return words, small


def _numpy(words, small) -> np.ndarray:
    def ctz(v: int, width: int) -> int:
        return width if v == 0 else (v & -v).bit_length() - 1

    rows = [(ctz(int(w), 64), bin(int(w)).count("1"), ctz(int(s) & 0xFFFFFFFF, 32),
             bin(int(s) & 0xFFFFFFFF).count("1") + 3) for w, s in zip(words, small)]
    return np.array(rows, np.int64)


def test_ctz_and_popcount_compiled_interpreted_and_numpy_agree():
    words, small = _cases()
    want = _numpy(words, small)
    got = np.zeros((len(words), 4), np.int64)
    bit_counts(words, small, got, n=len(words))
    np.testing.assert_array_equal(got, want)
    plain = np.zeros_like(got)
    bit_counts.py_func(words, small, plain, n=len(words))
    np.testing.assert_array_equal(plain, want)
    assert want[0, 0] == 64 and want[0, 2] == 32  # ctz(0) is the width, not undefined


def test_bit_count_of_a_float_is_a_source_error():
    @kernel(name="test.bad_ctz")
    def bad(x: Buf[i64, 1], y: Buf[i64, 1]):
        y[0] = kmath.ctz(x[0] * 0.5)

    with pytest.raises(KernelSourceError, match=r"test_lang_bits.py:\d+:\d+: .*kmath.ctz of a f64"):
        bad(np.zeros(1, np.int64), np.zeros(1, np.int64))
