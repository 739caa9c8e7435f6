"""Small example kernels, each with its numpy reference (same signature, same semantics).

They document how a kernel is written, and they are what the compile toolchain's tests and
benchmarks exercise (vectorisation, exp/sigmoid accuracy, GIL release, caching). All buffers are
C-contiguous float32 arrays passed by address.

Fast-math flags, per kernel:
- ``axpy``: ``contract`` (one FMA per element; results may differ from numpy by 1 rounding).
- ``exp_map`` / ``sigmoid_map``: ``contract``, which only the polynomial exp uses
  (`irutil.vexp`, through ``kmath.exp``).
- ``sum``: ``reassoc`` + ``contract`` (so the reduction vectorises; the summation order differs
  from numpy's pairwise sum, relative difference ~1e-6 for well-conditioned inputs).
- ``exp_accumulate``: ``contract``.
"""

from __future__ import annotations

import numpy as np

from .lang import Buf, f32, i64, kernel, kmath

CONTRACT = ("contract",)


@kernel(name="example.axpy", fastmath=CONTRACT)
def axpy(x: Buf[f32, "n"], y: Buf[f32, "n"], a: f32, *, n: int):
    """``y[i] += a * x[i]`` for ``i < n``."""
    for i in range(n):
        y[i] += a * x[i]


def axpy_ref(x: np.ndarray, y: np.ndarray, a: float) -> None:
    y += np.float32(a) * x


@kernel(name="example.exp_map", fastmath=CONTRACT)
def exp_map(x: Buf[f32, "n"], y: Buf[f32, "n"], *, n: int):
    """``y[i] = exp(x[i])`` (the polynomial exp) for ``i < n``."""
    for i in range(n):
        y[i] = kmath.exp(x[i])


def exp_map_ref(x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        y[:] = np.exp(x.astype(np.float64))  # correctly rounded to float32 by the store


@kernel(name="example.sigmoid_map", fastmath=CONTRACT)
def sigmoid_map(x: Buf[f32, "n"], y: Buf[f32, "n"], *, n: int):
    """``y[i] = 1 / (1 + exp(-x[i]))`` for ``i < n``."""
    for i in range(n):
        y[i] = kmath.sigmoid(x[i])


def sigmoid_map_ref(x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        y[:] = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


@kernel(name="example.sum", fastmath=("reassoc", "contract"))
def total(x: Buf[f32, "n"], *, n: int) -> f32:
    """``sum(x[:n])`` with a ``reassoc`` accumulator (vectorised)."""
    acc: f32 = 0.0
    for i in range(n):
        acc += x[i]
    return acc


def sum_ref(x: np.ndarray) -> float:
    return float(np.sum(x, dtype=np.float64))


@kernel(name="example.exp_accumulate", fastmath=CONTRACT)
def exp_accumulate(x: Buf[f32, "n"], y: Buf[f32, "n"], reps: i64, *, n: int):
    """``reps`` times, ``y[i] += exp(x[i])`` for ``i < n``. A deliberately long-running kernel
    (time grows linearly with ``reps``): the GIL-release test and benchmark run it on one
    thread while Python counts on another."""
    for _ in range(reps):
        for i in range(n):
            y[i] += kmath.exp(x[i])


def exp_accumulate_ref(x: np.ndarray, y: np.ndarray, reps: int) -> None:
    e = np.exp(x)
    for _ in range(reps):
        y += e


AXPY = axpy.spec(n=1024)
EXP_MAP = exp_map.spec(n=4096)
SIGMOID_MAP = sigmoid_map.spec(n=4096)
SUM = total.spec(n=4096)
EXP_ACCUMULATE = exp_accumulate.spec(n=4096)

ALL = (AXPY, EXP_MAP, SIGMOID_MAP, SUM, EXP_ACCUMULATE)
