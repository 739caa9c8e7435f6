"""The kernel language's bit counts (`kmath.ctz`, `kmath.popcount`): compiled == interpreted ==
numpy on i32 / i64 / u64 values, the zero case, constants folded, and the error on a float; the
set-bit loop ``for bit in bits(word)``: compiled == uncompiled == numpy for every int dtype,
break/continue, the word evaluated once, and its errors at their line:col."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import (Buf, bits, boolean, f32, i32, i64, inline, kernel,
                                           kmath, u64)
from cuvil_perception.errors import KernelSourceError

THIS = Path(__file__)


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


@kernel(name="test.narrow_bit_counts")
def narrow_bit_counts(words: Buf["wtype", "n"], out: Buf[i64, "n", 2], *, n: int, wtype: str):
    for k in range(n):
        out[k, 0], out[k, 1] = kmath.ctz(words[k]), kmath.popcount(words[k])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32])
def test_bit_counts_of_a_buffer_element_use_its_storage_width(dtype):
    """The load widens a narrow element to i32 (u32 to i64), and ctz(0) of a u8 was 32
    compiled but 8 uncompiled (numpy's uint8 scalar); popcount(-1) of an i8 was 32 and 8."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    words = np.concatenate([np.array([0, info.max, info.min, -1 if info.min else 1], dtype),
                            rng.integers(info.min, info.max, 100, dtype=dtype, endpoint=True)])
    wtype = np.dtype(dtype).name.replace("uint", "u").replace("int", "i")
    got, plain = np.zeros((len(words), 2), np.int64), np.zeros((len(words), 2), np.int64)
    narrow_bit_counts(words, got, n=len(words), wtype=wtype)
    narrow_bit_counts.py_func(words, plain, n=len(words), wtype=wtype)
    np.testing.assert_array_equal(got, plain)
    assert got[0, 0] == info.bits and got[3, 1] == (info.bits if info.min else 1)


def test_bit_count_of_a_float_is_a_source_error():
    @kernel(name="test.bad_ctz")
    def bad(x: Buf[i64, 1], y: Buf[i64, 1]):
        y[0] = kmath.ctz(x[0] * 0.5)

    with pytest.raises(KernelSourceError, match=r"test_lang_bits.py:\d+:\d+: .*kmath.ctz of a f64"):
        bad(np.zeros(1, np.int64), np.zeros(1, np.int64))


# -- for bit in bits(word) ----------------------------------------------------------------------
@kernel(name="test.set_bits")
def set_bits(words: Buf["wtype", "n"], out: Buf[i64, "n", 65], *, n: int, wtype: str):
    """Row k: the set bits of words[k] in visiting order, then -1s; the count in column 64."""
    for k in range(n):
        count = 0
        for bit in bits(words[k]):
            out[k, count] = bit
            count += 1
        out[k, 64] = count


def _set_bits_numpy(words: np.ndarray) -> np.ndarray:
    width = words.dtype.itemsize * 8
    out = np.full((len(words), 65), -1, np.int64)
    for k, w in enumerate(words):
        pattern = int(w) & ((1 << width) - 1)  # a negative word: its two's-complement bits
        found = [b for b in range(width) if pattern >> b & 1]
        out[k, :len(found)], out[k, 64] = found, len(found)
    return out


@pytest.mark.parametrize("wtype, dtype", [
    ("i8", np.int8), ("u8", np.uint8), ("i16", np.int16), ("u16", np.uint16), ("i32", np.int32),
    ("u32", np.uint32), ("i64", np.int64), ("u64", np.uint64)])
def test_bits_loop_compiled_uncompiled_and_numpy_agree(wtype, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    words = rng.integers(info.min, info.max, 200, dtype=dtype, endpoint=True)
    sparse = (np.ones(50, dtype) << rng.integers(0, info.bits, 50).astype(dtype)).astype(dtype)
    top = np.array([1], dtype) << np.array([info.bits - 1], dtype)  # the sign bit if signed
    special = np.array([0, info.max, info.min, 1], dtype)
    words = np.concatenate([special, top, np.array([-1 if info.min else info.max], dtype),
                            sparse, words]).astype(dtype)
    want = _set_bits_numpy(words)
    got = np.full_like(want, -1)
    set_bits(words, got, n=len(words), wtype=wtype)
    np.testing.assert_array_equal(got, want)
    plain = np.full_like(want, -1)
    set_bits.py_func(words, plain, n=len(words), wtype=wtype)
    np.testing.assert_array_equal(plain, want)
    assert want[0, 64] == 0 and want[5, 64] == info.bits  # 0: no bits; all-ones: every bit
    assert want[4, 0] == info.bits - 1                     # the top bit (an i64's bit 63)


def test_bits_uncompiled_twin_on_python_ints_and_its_refusals():
    assert list(bits(0)) == [] and list(bits(0b1010_0001)) == [0, 5, 7]
    assert list(bits(-1)) == list(range(64)) and list(bits(-(2**63))) == [63]  # i64 patterns
    assert list(bits(np.int8(-128))) == [7] and list(bits(np.uint64(2**64 - 1)))[-1] == 63
    for bad in (1.0, True, np.float32(2), np.bool_(True)):
        with pytest.raises(TypeError, match="needs an integer word"):
            bits(bad)


@kernel(name="test.bits_jumps")
def bits_jumps(words: Buf[i64, "n"], out: Buf[i64, "n", 3], *, n: int):
    """Per word: the sum of its even set bits below 40 (continue skips odd ones, break stops at
    40), how many bits the loop visited, and ``bit`` after the loop (an i64 variable)."""
    for k in range(n):
        total = visited = 0
        bit = -1
        for bit in bits(words[k]):
            if bit >= 40:
                break
            visited += 1
            if bit % 2 == 1:
                continue
            total += bit
        out[k, 0], out[k, 1], out[k, 2] = total, visited, bit


def test_bits_loop_break_and_continue_as_in_range_loops():
    rng = np.random.default_rng(11)
    words = rng.integers(-2**63, 2**63 - 1, 100, dtype=np.int64, endpoint=True)
    words[:4] = [0, -1, 1 << 40, (1 << 39) | 0b110]
    want = np.zeros((len(words), 3), np.int64)
    for k, w in enumerate(words):
        found = [b for b in range(64) if int(w) >> b & 1]
        below = [b for b in found if b < 40]
        stop = next((b for b in found if b >= 40), below[-1] if below else -1)
        want[k] = sum(b for b in below if b % 2 == 0), len(below), stop
    got, plain = np.zeros_like(want), np.zeros_like(want)
    bits_jumps(words, got, n=len(words))
    bits_jumps.py_func(words, plain, n=len(words))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(plain, want)
    assert got[0].tolist() == [0, 0, -1] and got[2].tolist() == [0, 0, 40]


@inline
def next_word(words, calls):
    """words[calls[0]], counting the call in calls[0]."""
    calls[0] += 1
    return words[calls[0] - 1]


@kernel(name="test.bits_once")
def bits_once(words: Buf[i64, 4], calls: Buf[i64, 1], out: Buf[i64, 2]):
    """A bits loop nested in another (bits of bits): each word expression evaluated once."""
    for first in bits(next_word(words, calls)):
        out[0] += 1
        for second in bits(i64(first) + 0b11):
            out[1] += second


def test_bits_loop_evaluates_its_word_once():
    words = np.array([0b1011, 99, 99, 99], np.int64)
    for run in (bits_once, bits_once.py_func):
        calls, out = np.zeros(1, np.int64), np.zeros(2, np.int64)
        run(words, calls, out)
        # bits 0, 1, 3; inner words 0b11 (bits 0 + 1), 0b100 (bit 2), 0b110 (bits 1 + 2)
        assert calls.tolist() == [1] and out.tolist() == [3, 1 + 2 + 3]


@kernel(name="test.bits_none")
def bits_none(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit in bits():  # @none
        y[0] = bit


@kernel(name="test.bits_two")
def bits_two(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit in bits(x[0], 2):  # @two
        y[0] = bit


@kernel(name="test.bits_keyword")
def bits_keyword(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit in bits(word=x[0]):  # @keyword
        y[0] = bit


@kernel(name="test.bits_float")
def bits_float(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit in bits(f32(x[0])):  # @float
        y[0] = bit


@kernel(name="test.bits_bool")
def bits_bool(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit in bits(boolean(x[0])):  # @bool
        y[0] = bit


@kernel(name="test.bits_tuple")
def bits_tuple(x: Buf[i64, 1], y: Buf[i64, 1]):
    for bit, other in bits(x[0]):  # @tuple
        y[0] = bit + other


@kernel(name="test.bits_outside")
def bits_outside(x: Buf[i64, 1], y: Buf[i64, 1]):
    y[0] = len(bits(x[0]))  # @outside


@kernel(name="test.bits_float_var")
def bits_float_var(x: Buf[i64, 1], y: Buf[i64, 1]):
    bit = 0.5
    for bit in bits(x[0]):  # @float_var
        y[0] = i64(bit)


def _where(marker: str, snippet: str) -> str:
    """``file:line:col:`` of ``snippet`` on the line ending with ``marker``."""
    line, text = next((n, t) for n, t in enumerate(THIS.read_text().splitlines(), 1)
                      if t.rstrip().endswith(marker))
    return f"{THIS}:{line}:{text.index(snippet) + 1}:"


@pytest.mark.parametrize("fn, marker, snippet, message", [
    (bits_none, "@none", "bits(", "bits() takes one positional argument, the integer word; "
                                  "write `for bit in bits(word)` instead"),
    (bits_two, "@two", "bits(", "bits() takes one positional argument"),
    (bits_keyword, "@keyword", "bits(", "bits() takes one positional argument"),
    (bits_float, "@float", "f32(", "bits() of a f32; write an integer word (i8 to i64, u8 to "
                                   "u64)"),
    (bits_bool, "@bool", "boolean(", "bits() of a boolean; write an integer word"),
    (bits_tuple, "@tuple", "bit, other", "a bits loop needs one loop variable; write `for bit in "
                                         "bits(word)` instead"),
    (bits_outside, "@outside", "bits(", "bits() outside a for loop; write `for bit in "
                                        "bits(word)` instead"),
    (bits_float_var, "@float_var", "for", "loop variable 'bit' is f64 elsewhere; range and bits "
                                          "loops count in i64"),
])
def test_bits_loop_errors_name_their_line_and_column(fn, marker, snippet, message):
    with pytest.raises(KernelSourceError) as err:
        fn(np.zeros(1, np.int64), np.zeros(1, np.int64))
    assert _where(marker, snippet) in str(err.value) and message in str(err.value)
