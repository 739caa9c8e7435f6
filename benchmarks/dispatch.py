"""Benchmark the per-call cost of ``kernel(...)`` (issue 28, item 1): an empty kernel and a
four-array kernel doing nothing, on small and on large arrays, called

- ``full``: the full checked call (`Kernel._call_checked`: spec, registry lookup, every check,
  ``arr.ctypes.data``) -- the path every call took before the dispatcher, plus the dispatch key
  it now computes to file an entry (~0.3-1 us of it);
- ``Python entry``: the dispatcher's Python entry (`dispatch.Entry.convert`, then the ctypes
  callable) -- every call's path before the native entry, and still the path of a call the
  native entry declines (a read-only array, an int for a float, a subclass);
- ``kernel(...)``: the dispatcher as it is: the cached entry's native trampoline
  (`compile.lang.trampoline`: checks and the call in compiled code);
- ``raw``: the bare ctypes callable with addresses computed beforehand (the floor).

Per call in microseconds, best of several interleaved rounds. Run:
``python benchmarks/dispatch.py [ROUNDS]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.compile import get_kernel  # noqa: E402
from cuvil_perception.compile.lang import Buf, f32, kernel  # noqa: E402
from cuvil_perception.compile.lang.dispatch import bind_extents, call_key  # noqa: E402


@kernel(name="bench_dispatch.empty")
def empty():
    pass


@kernel(name="bench_dispatch.four")
def four(a: Buf[f32, "n"], b: Buf[f32, "n"], c: Buf[f32, "n"], d: Buf[f32, "n", 4], *, n: int):
    pass


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def variants(k, args: tuple, static: dict) -> dict:
    k(*args, **static)  # compile / load, and file the entry
    raw_fn = get_kernel(k.spec(**static))
    addrs = [a.ctypes.data for a in args]
    return {"full": lambda: k._call_checked(args, static),
            "Python entry": lambda: python_entry(k, args, static),
            "kernel(...)": lambda: k(*args, **static),
            "raw": lambda: raw_fn(*addrs)}


def python_entry(k, args: tuple, static: dict):
    """`Kernel.__call__` as it was before the native entry."""
    static = bind_extents(k, args, static)
    entry = k._entries.get(call_key(k, static))
    return entry.fn(*entry.convert(args))


def main(rounds: int = 7) -> None:
    print_machine()
    cases = {"empty": (empty, (), {})}
    for n in (1024, 4_000_000):
        arrs = tuple(np.zeros(n, np.float32) for _ in range(3)) + (np.zeros((n, 4), np.float32),)
        cases[f"four arrays, n={n}"] = (four, arrs, {"n": n})
    rows = []
    for label, (k, args, static) in cases.items():
        fns = variants(k, args, static)
        best = {name: float("inf") for name in fns}
        for _ in range(rounds):  # interleaved: each round times every variant once
            for name, fn in fns.items():
                calls = 200 if name == "full" else 20000
                best[name] = min(best[name], per_call_us(fn, calls))
        rows.append([label, *(f"{best[name]:.2f}" for name in fns),
                     f"{best['Python entry'] / best['kernel(...)']:.1f}x"])
    print_table("kernel(...) per-call cost, us (best of %d interleaved rounds)" % rounds,
                ["kernel", "full check", "Python entry (before)", "kernel(...)",
                 "raw addresses", "Python entry / kernel(...)"], rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
