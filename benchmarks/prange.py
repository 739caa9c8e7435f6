"""Benchmark ``prange`` loops (issue 28, item 3): 1 vs 2 (vs 4) threads on real-size loops, and
the cost of one launch.

- ``row sums``: per-row f32 sums of a [4096, 1024] image (16 MiB) and their f64 total (a
  reduction): each row's sum is a dependent chain of adds, so a core is busy, not the memory;
- ``range image``: the nearest range per cell of a [64, 2048] image of 120k LiDAR points (a
  64-beam frame) with ``atomic_min`` and an ``atomic_add`` hit count;
- ``launch``: a prange loop of 64 one-iteration chunks (the fixed cost: posting the job, the
  helpers' wake-up, the wait), against the same kernel with ``range``; through ``kernel(...)``
  and through the raw callable (``get_kernel(spec)(address)``, which supplies the thread
  record: the launch without the checked call's cost).

Median per call in milliseconds (microseconds for the launch), interleaved: each round calls
every variant once; the 1 -> 2 speed-up of the medians, and of the best rounds (the rounds in
which the machine's other work left a second core free). Every variant's outputs are checked
bit-equal to the 1-thread run. Run:
``python benchmarks/prange.py [ROUNDS]``. On a machine shared with other work a second thread
only helps when a second core is free: the figures say how the cores were shared, not only how
the pool scales.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.compile import get_kernel  # noqa: E402
from cuvil_perception.compile.lang import (Buf, atomic_add, atomic_min, f32, f64, i32,  # noqa
                                           i64, kernel, prange, threads)


@kernel(name="bench_prange.row_sums")
def row_sums(x: Buf[f32, "rows", "cols"], out: Buf[f32, "rows"], *, rows: int,
             cols: int) -> f64:
    total = 0.0
    for r in prange(rows):
        s = f32(0.0)
        for c in range(cols):
            s += x[r, c]
        out[r] = s
        total += f64(s)
    return total


@kernel(name="bench_prange.range_image")
def range_image(points: Buf[f32, "n", 4], img: Buf[f32, 64, 2048], hits: Buf[i32, 64, 2048],
                n: i64):
    for p in prange(n):
        x, y, z = points[p, 0], points[p, 1], points[p, 2]
        rng = f32(x * x + y * y + z * z) ** 0.5
        if rng <= 0.0:
            continue
        col = i64((y / rng + 1.0) * 1023.99)
        row = i64((z / rng + 1.0) * 31.99)
        atomic_min(img, (row, col), rng)
        atomic_add(hits, (row, col), 1)


@kernel(name="bench_prange.launch")
def launch(x: Buf[f32, 64]) -> f32:
    s = f32(0.0)
    for i in prange(64):
        s += x[i]
    return s


@kernel(name="bench_prange.no_launch")
def no_launch(x: Buf[f32, 64]) -> f32:
    s = f32(0.0)
    for i in range(64):
        s += x[i]
    return s


def cases(rng) -> dict:
    x = rng.normal(size=(4096, 1024)).astype(np.float32)
    pts = np.concatenate([rng.normal(size=(120_000, 3)) * [20, 20, 2],
                          np.ones((120_000, 1))], axis=1).astype(np.float32)
    small = rng.normal(size=64).astype(np.float32)

    def rows():
        out = np.empty(4096, np.float32)
        return out, row_sums(x, out, rows=4096, cols=1024)

    def image():
        img, hits = np.full((64, 2048), np.inf, np.float32), np.zeros((64, 2048), np.int32)
        range_image(pts, img, hits, len(pts))
        return img, hits

    raw_launch, raw_range = get_kernel(launch.spec()), get_kernel(no_launch.spec())
    at = small.ctypes.data
    return {"row sums [4096, 1024] f32": (rows, 1e3, 1),
            "range image, 120k points": (image, 1e3, 1),
            "launch (64 chunks of 1), kernel(...)": (lambda: launch(small), 1e6, 200),
            "same with range, kernel(...)": (lambda: no_launch(small), 1e6, 200),
            "launch, raw callable": (lambda: raw_launch(at), 1e6, 500),
            "same with range, raw callable": (lambda: raw_range(at), 1e6, 500)}


def main(rounds: int = 15) -> None:
    print_machine()
    counts = (1, 2, 4)
    times = {(name, t): [] for name in cases(np.random.default_rng(0)) for t in counts}
    rows = []
    for name, (fn, scale, reps) in cases(np.random.default_rng(0)).items():
        first = {}
        for t in counts:
            with threads(t):
                first[t] = fn()  # compile / load, start the pool's workers
        same = all(_bits(first[t]) == _bits(first[1]) for t in counts)
        for _ in range(rounds):
            for t in counts:
                with threads(t):
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    times[(name, t)].append((time.perf_counter() - t0) / reps * scale)
        med = {t: statistics.median(times[(name, t)]) for t in counts}
        best = {t: min(times[(name, t)]) for t in counts}
        unit = "ms" if scale == 1e3 else "us"
        rows.append([name, *(f"{med[t]:.3f} {unit}" for t in counts),
                     f"{best[1]:.3f} / {best[2]:.3f}", f"{med[1] / med[2]:.2f}x",
                     f"{best[1] / best[2]:.2f}x", "yes" if same else "NO"])
    print_table(f"prange: median per call ({rounds} interleaved rounds)",
                ["loop", "1 thread", "2 threads", "4 threads", "best 1 / 2", "1 -> 2",
                 "1 -> 2 (best)", "same bits"], rows)


def _bits(result) -> bytes:
    items = result if isinstance(result, tuple) else (result,)
    return b"".join(np.asarray(r).tobytes() for r in items)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
