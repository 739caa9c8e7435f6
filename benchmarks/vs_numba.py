"""Our kernels against the same algorithms in numba: per call, interleaved, one thread.

Per kernel: the project's native kernels (as their ops call them) and three kernels of the
kinds users write (benchmarks/_user_kernels.py: range image, voxel centroids, letterbox,
called through ``kernel(...)``), each beside its numba twin (_user_kernels_numba.py,
_numba_kernels.py, _numba_pillarize.py: ``@njit``, no fastmath, the same statements). The
outputs of both are compared (bitwise) before timing. Timing: the two alternate call by call,
each round one call per input; the figure is the fastest call on each input, averaged over the
inputs (on a shared machine the fastest call is the least noisy estimate; read the ratio).
Inputs: the KITTI scans in ../shared/data/kitti_velodyne and the photos in
../shared/data/yolov8 where they apply, else seeded random data.

numba is an optional, benchmark-only install (``pip install -e '.[bench]'``); without it
this prints a message and exits 0. numba runs on one thread (``@njit`` without ``parallel``;
NUMBA_NUM_THREADS=1 is set before the import anyway).

Run: ``python benchmarks/vs_numba.py [--rounds N] [--cpu NAME] [NAME ...]`` (names: substrings
of the kernel names to run; all by default). ``--cpu znver3`` compiles both sides for that LLVM
CPU with its own default features (znver3: AVX2 + FMA, no AVX-512), run on this machine: how
the two compare on a CPU without AVX-512.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_machine, print_table  # noqa: E402

DATA = HERE.parents[1] / "shared" / "data"


@dataclass
class Case:
    """One kernel: ``inputs`` (one call each per round), ``ours`` / ``numba`` (input -> list
    of output arrays or numbers); ``tolerance``: 0 for bitwise equal outputs, else the
    relative tolerance of a twin that rounds differently (see _numba_kernels.CLOSE)."""

    name: str
    inputs: Sequence
    ours: Callable
    numba: Callable
    tolerance: float = 0.0


def kitti_scans(count: int = 3) -> list[np.ndarray]:
    """``count`` KITTI scans (float32 [N, 4]), or seeded random points in the pillar range."""
    frames = sorted((DATA / "kitti_velodyne").glob("*.bin"))[:count]
    if frames:
        return [np.fromfile(f, np.float32).reshape(-1, 4) for f in frames]
    rng = np.random.default_rng(0)
    lo, hi = [0.0, -39.68, -3.0, 0.0], [69.12, 39.68, 1.0, 1.0]
    return [rng.uniform(lo, hi, (20000, 4)).astype(np.float32) for _ in range(count)]


def photos() -> list[np.ndarray]:
    """The two photos (BGR uint8), or two seeded random images of their sizes."""
    import cv2

    found = [cv2.imread(str(p)) for p in sorted((DATA / "yolov8").glob("*.jpg"))]
    found = [f for f in found if f is not None]
    if found:
        return found
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, s, np.uint8) for s in ((1080, 810, 3), (375, 1242, 3))]


def _copy(outputs) -> list:
    return [o.copy() if isinstance(o, np.ndarray) else o for o in outputs]


def _user_cases() -> list[Case]:
    import _user_kernels as uk
    import _user_kernels_numba as un

    scans, images = kitti_scans(), photos()
    # One set of arrays per input, shared by both sides: the same addresses, so the same
    # cache and page behaviour (each kernel rewrites what it reads back; the grid of the voxel
    # kernel is -1 again after each call).
    arrays = {}

    def args_of(make, item):
        return arrays.setdefault((make, id(item)), make(item))

    def ri_ours(pts):
        args, static = args_of(uk.range_image_args, pts)
        uk.range_image(*args, **static)
        return args[2:]

    def ri_numba(pts):
        args, _ = args_of(uk.range_image_args, pts)
        un.range_image(*args)
        return args[2:]

    def vox_ours(pts):
        args, static = args_of(uk.voxel_args, pts)
        m = uk.voxel_centroids(*args, **static)
        return [m, args[6][:m]]

    def vox_numba(pts):
        args, _ = args_of(uk.voxel_args, pts)
        m = un.voxel_centroids(*args)
        return [m, args[6][:m]]

    def lb_ours(img):
        args, static = args_of(uk.letterbox_args, img)
        uk.letterbox(*args, **static)
        return [args[1]]

    def lb_numba(img):
        args, static = args_of(uk.letterbox_args, img)
        un.letterbox_call(*args, static)
        return [args[1]]

    return [Case("user: range image 64x2048", scans, ri_ours, ri_numba),
            Case("user: voxel centroids 0.4 m", scans, vox_ours, vox_numba),
            Case("user: letterbox 640", images, lb_ours, lb_numba)]


def cases() -> list[Case]:
    """Every kernel compared, project kernels first."""
    import _numba_kernels

    return _numba_kernels.project_cases(kitti_scans()) + _user_cases()


def check(case: Case) -> None:
    """Both sides' outputs on every input: bitwise (NaN == NaN), or within the case's
    tolerance; AssertionError otherwise."""
    for k, item in enumerate(case.inputs):
        ours, theirs = _copy(case.ours(item)), _copy(case.numba(item))
        for j, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            if case.tolerance and a.dtype.kind == "f":
                scale = float(np.nanmax(np.abs(b), initial=1.0))  # (cancellation: x1 = c - w/2)
                same = a.shape == b.shape and np.allclose(a, b, rtol=case.tolerance,
                                                          atol=case.tolerance * scale,
                                                          equal_nan=True)
            else:
                same = np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            assert same, f"{case.name}: output {j} of input {k} differs from numba's"


def time_case(case: Case, rounds: int) -> tuple[float, float]:
    """(ours, numba) per call, microseconds: the fastest of ``rounds`` calls on each input,
    averaged over the inputs. The two sides alternate call by call (which goes first flips
    every round); the fastest call is the one no other process interrupted, which on a shared
    machine is the least noisy estimate (read the ratio)."""
    best = np.full((2, len(case.inputs)), np.inf)
    sides = (case.ours, case.numba)
    for r in range(rounds):
        for k, item in enumerate(case.inputs):
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                sides[side](item)
                best[side, k] = min(best[side, k], time.perf_counter() - t0)
    ours, theirs = best.mean(axis=1) * 1e6
    return float(ours), float(theirs)


def use_cpu(name: str) -> None:
    """Both sides compile for LLVM CPU ``name`` with its default features (numba through its
    NUMBA_CPU_* switches, read at its import; ours by replacing the host target the registry
    asks for, benchmark only)."""
    os.environ["NUMBA_CPU_NAME"], os.environ["NUMBA_CPU_FEATURES"] = name, ""
    from cuvil_perception.compile import registry, target

    host = target.host_target()
    chosen = target.Target(triple=host.triple, cpu=name, features="", host=True)
    registry.host_target = target.host_target = lambda: chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="substrings of kernel names to run")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--cpu", help="compile both sides for this LLVM CPU name (e.g. znver3)")
    args = parser.parse_args()
    print_machine()
    if args.cpu:
        use_cpu(args.cpu)
    try:
        import numba
    except ImportError:
        print("numba is not installed (optional, benchmark only: pip install -e '.[bench]'); "
              "skipping")
        return
    print(f"numba {numba.__version__}, one thread" +
          (f"; code for {args.cpu} (its default features)" if args.cpu else ""))
    rows = []
    for case in cases():
        if args.names and not any(n in case.name for n in args.names):
            continue
        check(case)
        for _ in range(2):  # warm: compiled, loaded, caches touched
            time_case(case, 1)
        ours, theirs = time_case(case, args.rounds)
        rows.append((case.name, ours, theirs, f"{ours / theirs:.2f}"))
        print(f"  {case.name}: ours {ours:.1f} us, numba {theirs:.1f} us", flush=True)
    print_table("ours vs numba, per call (us, fastest of the rounds; ours / numba < 1: faster)",
                ["kernel", "ours us", "numba us", "ours / numba"], rows)


if __name__ == "__main__":
    main()
