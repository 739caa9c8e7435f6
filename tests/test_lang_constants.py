"""Constant folding gives what the compiled run-time code gives: every operator, cast and
`kmath` function on edge values (0, -1, the i64 limits, the u64 pattern 2**63, 1e308, inf, NaN,
-0.0...), written once with constants (folded when compiling) and once on the same values read
from buffers at run time, must agree bit for bit (any NaN as NaN), and the uncompiled function
(`kernel.py_func`, numpy scalars) too except where docs/kernel-language.md says it differs. A
constant expression without a run-time value is a compile error at its line:col naming it,
never an internal error ("IR generation failed: OverflowError ...")."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f64, folding, i32, i64, kernel, kmath
from cuvil_perception.compile.lang.math_lower import _fold_math
from cuvil_perception.compile.lang.types import BY_NAME
from cuvil_perception.errors import KernelSourceError

INTS = [0, -1, 1, 3, 64, 2**63 - 1, -2**63, 2**63]
FLOATS = [0.0, -0.0, 2.5, -2.5, 1e10, 1e308, math.inf, -math.inf, math.nan]
EDGES = INTS + FLOATS + [True]
ARITH = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^"]
COMPARE = ["<", "<=", ">", ">=", "==", "!="]
MINMAX = ["min", "max"]
CASTS = ["i32", "i64", "f32", "f64", "boolean"]
CALLS = CASTS + ["abs", "kmath.sqrt", "kmath.exp", "kmath.log", "kmath.floor", "kmath.trunc"]
HEADER = """from cuvil_perception.compile.lang import Buf, boolean, f32, f64, i32, i64, kernel, kmath

INF, NAN = float("inf"), float("nan")
"""


@dataclass
class Case:
    op: str
    a: object
    b: object = None

    @property
    def binary(self) -> bool:
        return self.b is not None

    def text(self, a: str, b: str) -> str:
        if self.binary:
            return f"{self.op}({a}, {b})" if self.op in MINMAX else f"{a} {self.op} {b}"
        return f"{self.op}({a})" if self.op in CALLS else f"{self.op}{a}"

    def folded(self) -> str:
        return self.text(literal(self.a), literal(self.b))

    def runtime(self, k: int) -> str:
        exponent = self.op == "**" and type(self.b) is int  # a constant exponent unrolls
        return self.text(operand(self.a, "a", k),
                         literal(self.b) if exponent else operand(self.b, "b", k))

    def is_float(self) -> bool:
        op, a, b = self.op, self.a, self.b
        if op in COMPARE or op in ("i32", "i64", "boolean"):
            return False
        if not self.binary:
            return isinstance(a, float) or op in ("f32", "f64") or op.startswith("kmath.")
        if op in ("/", "f32", "f64") or op.startswith("kmath."):
            return True
        if op == "**" and not (type(b) is int and 0 <= b < 2**63):
            return True
        return isinstance(a, float) or isinstance(b, float)

    def fold(self):
        """What `folding` makes of it (the oracle of which cases are refused)."""
        op, a, b = self.op, self.a, self.b
        if op in MINMAX:
            return folding.minmax(op == "min", a, b)
        if self.binary:
            return (folding.compare if op in COMPARE else folding.binary)(op, a, b)
        if op in CASTS:
            return folding.cast(BY_NAME[op], a)
        if op == "abs":
            return folding.absolute(a)
        if op.startswith("kmath."):
            return _fold_math(getattr(kmath, op[6:]), a)
        return folding.unary(op, a)

    def refusal(self) -> str | None:
        """The `FoldError` message, if any; an int is then stored (as an i64)."""
        try:
            out = self.fold()
            if type(out) is int:
                folding.wrap(out)
        except folding.FoldError as exc:
            return exc.args[0]
        return None


def literal(v) -> str:
    """``v`` as kernel source: a literal, or a module-level name (inf, NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NAN" if v != v else ("INF" if v > 0 else "(-INF)")
    return f"({v!r})"


def operand(v, side: str, k: int) -> str:
    """``v`` read at run time from row k of the side's int or float buffer (a bool stays a
    literal: a run-time bool from a comparison is a numpy bool uncompiled, whose + is `or`)."""
    if isinstance(v, bool) or v is None:
        return literal(v)
    return f"{side}{'f' if isinstance(v, float) else 'i'}[{k}]"


def all_cases() -> list[Case]:
    out = []
    for op, a, b in itertools.product(ARITH + COMPARE + MINMAX, EDGES, EDGES):
        bits = op in ("&", "|", "^", "<<", ">>")
        if not (bits and (isinstance(a, float) or isinstance(b, float))):
            out.append(Case(op, a, b))  # (float bit operations: test_float_bit_operators)
    for op, a in itertools.product(CALLS + ["-", "~"], EDGES):
        if not (op == "~" and isinstance(a, float)):
            out.append(Case(op, a))
    return out


CASES = all_cases()
KEPT = [c for c in CASES if c.refusal() is None]
REFUSED = [c for c in CASES if c.refusal() is not None]


def _store(case: Case, k: int, expr: str) -> str:
    return (f"    outf[{k}] = f64({expr})" if case.is_float()
            else f"    outi[{k}] = i64({expr})")


def _source() -> str:
    """The module under test: one folded and one run-time kernel over every kept case, a
    kernel per refused case, and a run-time kernel per kept case for `py_func` (numpy
    raises on some rows, which would stop a kernel of all of them)."""
    lines = [HEADER]
    n = len(KEPT)
    lines += ["@kernel(name='constants.folded')",
              f"def folded(outi: Buf[i64, {n}], outf: Buf[f64, {n}]):"]
    lines += [_store(c, k, c.folded()) for k, c in enumerate(KEPT)]
    lines += ["", "", "@kernel(name='constants.runtime')",
              f"def runtime(ai: Buf[i64, {n}], af: Buf[f64, {n}], bi: Buf[i64, {n}], "
              f"bf: Buf[f64, {n}], outi: Buf[i64, {n}], outf: Buf[f64, {n}]):"]
    lines += [_store(c, k, c.runtime(k)) for k, c in enumerate(KEPT)]
    for k, c in enumerate(KEPT):
        lines += ["", "", f"@kernel(name='constants.py{k}')",
                  f"def py{k}(ai: Buf[i64, {n}], af: Buf[f64, {n}], bi: Buf[i64, {n}], "
                  f"bf: Buf[f64, {n}], outi: Buf[i64, {n}], outf: Buf[f64, {n}]):",
                  _store(c, k, c.runtime(k))]
    for j, c in enumerate(REFUSED):
        lines += ["", "", f"@kernel(name='constants.refused{j}')",
                  f"def refused{j}(outi: Buf[i64, 1], outf: Buf[f64, 1]):",
                  _store(c, 0, c.folded())]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("constants") / "constant_cases.py"
    path.write_text(_source())
    spec = importlib.util.spec_from_file_location("constant_cases", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    del sys.modules[spec.name]


@functools.lru_cache(maxsize=1)
def _inputs() -> tuple[np.ndarray, ...]:
    """The run-time operands of every kept case, by row: a's int and float, b's."""
    def column(values, dtype):
        return np.array([v if isinstance(v, dtype) and not isinstance(v, bool) else 0
                         for v in values], object).astype(dtype)

    wrap = [folding.wrap(v) if type(v) is int else v for v in (c.a for c in KEPT)]
    wrap_b = [folding.wrap(v) if type(v) is int else v for v in (c.b for c in KEPT)]
    return (column(wrap, int).astype(np.int64), column(wrap, float).astype(np.float64),
            column(wrap_b, int).astype(np.int64), column(wrap_b, float).astype(np.float64))


def _same(x, y) -> np.ndarray:
    """Bitwise equal, any NaN equal to any NaN."""
    if x.dtype.kind == "f":
        return (x.view(np.int64) == y.view(np.int64)) | (np.isnan(x) & np.isnan(y))
    return x == y


def _differs(case: Case, k: int, got: list, want: list) -> bool:
    side = 1 if case.is_float() else 0
    return not _same(got[side][k:k + 1], want[side][k:k + 1])[0]


def _show(case: Case, k: int, outs: list) -> str:
    return f"{case.folded()}: {outs[1 if case.is_float() else 0][k]!r}"


def test_constant_folding_gives_the_run_time_result(module):
    n = len(KEPT)
    folded = [np.zeros(n, np.int64), np.zeros(n, np.float64)]
    module.folded(*folded)
    runtime = [np.zeros(n, np.int64), np.zeros(n, np.float64)]
    module.runtime(*_inputs(), *runtime)
    bad = [f"{_show(c, k, folded)} folded, {_show(c, k, runtime)} at run time"
           for k, c in enumerate(KEPT) if _differs(c, k, folded, runtime)]
    assert bad == [], "\n".join(bad)


def _documented(case: Case) -> bool:
    """Where the uncompiled function differs as kernel-language.md says ("Where the semantics
    differ from Python"): numpy's int ``// 0`` and ``% 0`` are 0 (compiled: x and 0); an int
    ``** -1`` raises (compiled: an f64); a float ``** n`` multiplies n out (numpy: pow, 1 ulp
    apart at 2.5 ** 64); the literal 2**63 is an i64 (the u64 pattern: -2**63)."""
    ints = not (isinstance(case.a, float) or isinstance(case.b, float))
    if case.op in ("//", "%"):
        return ints and case.b == 0
    return case.op == "**" and (case.b == 2**63 or (ints and case.b < 0)
                                or (isinstance(case.a, float) and type(case.b) is int))


def test_the_uncompiled_function_agrees_where_the_docs_say_it_does(module):
    n = len(KEPT)
    runtime = [np.zeros(n, np.int64), np.zeros(n, np.float64)]
    module.runtime(*_inputs(), *runtime)
    bad = []
    for k, case in enumerate(KEPT):
        if _documented(case):
            continue
        plain = [np.zeros(n, np.int64), np.zeros(n, np.float64)]
        try:
            with np.errstate(all="ignore"):
                getattr(module, f"py{k}").py_func(*_inputs(), *plain)
        except Exception as exc:
            bad.append(f"{case.runtime(k)}: py_func raises {type(exc).__name__}: {exc}")
            continue
        if _differs(case, k, plain, runtime):
            bad.append(f"{_show(case, k, plain)} uncompiled, {_show(case, k, runtime)} "
                       f"compiled")
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("j", range(len(REFUSED)),
                         ids=[c.folded() for c in REFUSED])
def test_a_constant_expression_without_a_value_is_a_compile_error_at_its_line(module, j):
    case = REFUSED[j]
    kern = getattr(module, f"refused{j}")
    with pytest.raises(KernelSourceError) as info:
        kern(np.zeros(1, np.int64), np.zeros(1, np.float64))
    message = str(info.value)
    line = Path(module.__file__).read_text().splitlines().index(
        _store(case, 0, case.folded())) + 1
    assert f"constant_cases.py:{line}:" in message, message
    assert case.refusal() in message and "IR generation failed" not in message, message


@kernel(name="test.constants_casts")
def casts(a: i64, x: f64, out: Buf[i64, 4], *, s: int):
    out[0], out[1] = i32(a), i32(s)
    out[2], out[3] = i32(x), i32(66571993088)


def test_an_int_cast_wraps_folded_compiled_and_uncompiled():
    """``i32(66571993088)`` was "IR generation failed: OverflowError: Python integer
    66571993088 out of bounds for int32" (and ``i64(2**63)`` "Python int too large to convert
    to C long"); uncompiled, numpy raised for the Python int."""
    got, want = np.zeros(4, np.int64), np.zeros(4, np.int64)
    casts(66571993088, 1e10, got, s=-2**40 - 7)
    casts.py_func(66571993088, 1e10, want, s=-2**40 - 7)
    np.testing.assert_array_equal(got, want)
    assert got.tolist() == [-2**31, -7, 2**31 - 1, -2**31]


@kernel(name="test.constants_fma")
def fmas(a: f64, b: f64, c: f64, out: Buf[f64, 2]):
    out[0], out[1] = kmath.fma(a, b, c), kmath.fma(0.1, 10.0, -1.0)


def test_a_constant_fma_rounds_once_as_at_run_time():
    """The folded fma was numpy's twin, which rounds the product first: 0.0."""
    got = np.zeros(2)
    fmas(0.1, 10.0, -1.0, got)
    assert got[0] == got[1] == 5.551115123125783e-17
