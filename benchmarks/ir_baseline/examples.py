"""Small example kernels, each with its numpy reference (same signature, same semantics).

They document how a kernel is written, and they are what the compile toolchain's tests and
benchmarks exercise (vectorisation, exp/sigmoid accuracy, GIL release, caching). All buffers are
C-contiguous float32 arrays passed by address.

Fast-math flags, per kernel:
- ``axpy``: ``contract`` (one FMA per element; results may differ from numpy by 1 rounding).
- ``exp_map`` / ``sigmoid_map``: none on the kernel itself; `irutil.vexp` uses ``contract``.
- ``sum``: ``reassoc`` + ``contract`` (so the reduction vectorises; the summation order differs
  from numpy's pairwise sum, relative difference ~1e-6 for well-conditioned inputs).
- ``exp_accumulate``: ``contract``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import _ir as u
from cuvil_perception.compile.spec import KernelSpec


def _fn(module: ir.Module, name: str, args: list[ir.Type], ret: ir.Type = u.VOID):
    fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def build_axpy(module: ir.Module, fn_name: str, *, n: int) -> None:
    """``void f(ptr x, ptr y, float a)``: ``y[i] += a * x[i]`` for ``i < n`` (float32)."""
    fn, b = _fn(module, fn_name, [u.PTR, u.PTR, u.F32])
    x, y, a = fn.args
    ff = ("contract",)
    with u.for_range(b, 0, n) as i:
        prod = b.fmul(a, u.load_at(b, x, i, u.F32), flags=ff)
        u.store_at(b, b.fadd(u.load_at(b, y, i, u.F32), prod, flags=ff), y, i)
    b.ret_void()


def axpy_ref(x: np.ndarray, y: np.ndarray, a: float) -> None:
    y += np.float32(a) * x


def _build_map(module: ir.Module, fn_name: str, n: int, op) -> None:
    fn, b = _fn(module, fn_name, [u.PTR, u.PTR])
    x, y = fn.args
    with u.for_range(b, 0, n) as i:
        u.store_at(b, op(b, u.load_at(b, x, i, u.F32)), y, i)
    b.ret_void()


def build_exp_map(module: ir.Module, fn_name: str, *, n: int) -> None:
    """``void f(ptr x, ptr y)``: ``y[i] = exp(x[i])`` (`irutil.vexp`) for ``i < n``."""
    _build_map(module, fn_name, n, u.vexp)


def exp_map_ref(x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        y[:] = np.exp(x.astype(np.float64))  # correctly rounded to float32 by the store


def build_sigmoid_map(module: ir.Module, fn_name: str, *, n: int) -> None:
    """``void f(ptr x, ptr y)``: ``y[i] = 1 / (1 + exp(-x[i]))`` for ``i < n``."""
    _build_map(module, fn_name, n, u.sigmoid)


def sigmoid_map_ref(x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        y[:] = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def build_sum(module: ir.Module, fn_name: str, *, n: int) -> None:
    """``float f(ptr x)``: ``sum(x[:n])`` with a ``reassoc`` accumulator (vectorised)."""
    fn, b = _fn(module, fn_name, [u.PTR], u.F32)
    (x,) = fn.args
    acc = u.entry_alloca(b, u.F32, "acc", init=u.const_f32(0.0))
    with u.for_range(b, 0, n) as i:
        total = b.fadd(b.load(acc, typ=u.F32), u.load_at(b, x, i, u.F32),
                       flags=("reassoc", "contract"))
        b.store(total, acc)
    b.ret(b.load(acc, typ=u.F32))


def sum_ref(x: np.ndarray) -> float:
    return float(np.sum(x, dtype=np.float64))


def build_exp_accumulate(module: ir.Module, fn_name: str, *, n: int) -> None:
    """``void f(ptr x, ptr y, i64 reps)``: ``reps`` times, ``y[i] += exp(x[i])`` for ``i < n``.

    A deliberately long-running kernel (time grows linearly with ``reps``): the GIL-release
    test and benchmark run it on one thread while Python counts on another.
    """
    fn, b = _fn(module, fn_name, [u.PTR, u.PTR, u.I64])
    x, y, reps = fn.args
    ff = ("contract",)
    with u.for_range(b, 0, reps, name="r"):
        with u.for_range(b, 0, n) as i:
            e = u.vexp(b, u.load_at(b, x, i, u.F32))
            u.store_at(b, b.fadd(u.load_at(b, y, i, u.F32), e, flags=ff), y, i)
    b.ret_void()


def exp_accumulate_ref(x: np.ndarray, y: np.ndarray, reps: int) -> None:
    e = np.exp(x)
    for _ in range(reps):
        y += e


AXPY = KernelSpec("example.axpy", build_axpy, {"n": 1024}, ("ptr", "ptr", "f32"),
                  fastmath=("contract",))
EXP_MAP = KernelSpec("example.exp_map", build_exp_map, {"n": 4096}, ("ptr", "ptr"),
                     fastmath=("contract",))
SIGMOID_MAP = KernelSpec("example.sigmoid_map", build_sigmoid_map, {"n": 4096}, ("ptr", "ptr"),
                         fastmath=("contract",))
SUM = KernelSpec("example.sum", build_sum, {"n": 4096}, ("ptr",), ret="f32",
                 fastmath=("reassoc", "contract"))
EXP_ACCUMULATE = KernelSpec("example.exp_accumulate", build_exp_accumulate, {"n": 4096},
                            ("ptr", "ptr", "i64"), fastmath=("contract",))

ALL = (AXPY, EXP_MAP, SIGMOID_MAP, SUM, EXP_ACCUMULATE)
