"""The numba anchor on pillarize, beside our kernel-language pillarize (benchmark only).

numba is an optional, benchmark-only install: ``pip install -e '.[bench]'``. Without it this
prints a message and exits 0. Measured, each in a fresh interpreter (imports and the first call
are one-off costs a pipeline pays at start-up): ``import numba`` / ``import
cuvil_perception.compile``; the first call with an empty cache (compile) and with a warm one
(cache load); then the per-call time of both kernels on the same KITTI scans in one process
(best round; read the ratio).

The numba function is a plain sequential pillarize written for this comparison (same rules as
``reference.pillarize``: ids in order of first appearance, at most K points per pillar, the
rest dropped); its outputs are checked against our kernel's before timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_machine, print_table  # noqa: E402

_FRESH = """
import sys, time
t0 = time.perf_counter()
import numba  # noqa: F401
t1 = time.perf_counter()
sys.path.insert(0, {here!r})
import _numba_pillarize as k
import numpy as np
pts = np.fromfile({scan!r}, np.float32).reshape(-1, 4) if {scan!r} else \\
    np.random.default_rng(0).uniform(0, 40, (20000, 4)).astype(np.float32)
state = k.make_state()
t2 = time.perf_counter()
k.run(pts, state)
t3 = time.perf_counter()
print((t1 - t0) * 1e3, (t3 - t2) * 1e3)
"""


_OURS = """
import time
t0 = time.perf_counter()
import cuvil_perception.compile as c
t1 = time.perf_counter()
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.kernel_pillarize import pillarize_spec
spec = pillarize_spec(PillarConfig())
t2 = time.perf_counter()
c.get_kernel(spec)
t3 = time.perf_counter()
print((t1 - t0) * 1e3, (t3 - t2) * 1e3)
"""


def fresh_ours(cache_dir: str) -> tuple[float, float]:
    """(import of the compile package, first get_kernel) in a fresh interpreter, ms."""
    env = {**os.environ, "CUVIL_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", _OURS], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    return float(out[-2]), float(out[-1])


def fresh_numba(scan: str, cache_dir: str) -> tuple[float, float]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", _FRESH.format(here=str(HERE), scan=scan)],
                         capture_output=True, text=True, check=True, env=env).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    print_machine()
    try:
        import numba  # noqa: F401
    except ImportError:
        print("numba is not installed (optional, benchmark only: pip install -e '.[bench]'); "
              "skipping the numba anchor")
        return
    import _numba_pillarize as nk
    from _cases import PC, kitti_points

    from cuvil_perception.ops.pillars import native

    rng = np.random.default_rng(0)
    scans = [kitti_points(rng, i) for i in range(3)]
    frames = sorted((HERE.parents[1] / "shared" / "data" / "kitti_velodyne").glob("*.bin"))
    with tempfile.TemporaryDirectory() as cache:
        imp, cold = fresh_numba(str(frames[0]) if frames else "", cache)
        _, warm = fresh_numba(str(frames[0]) if frames else "", cache)
    with tempfile.TemporaryDirectory() as cache:
        our_imp, our_cold = fresh_ours(cache)
        _, our_warm = fresh_ours(cache)
    ours = native.PillarizeKernel(PC).open()
    state = nk.make_state()
    for pts in scans:  # same pillars, same points in them
        count = nk.run(pts, state)
        out = ours(pts)
        assert count == int(out.counts[0]), (count, int(out.counts[0]))
        assert np.array_equal(state[1][:count], out.num_points[:count])
        assert np.array_equal(state[0][:count], out.voxels[:count])
    t_ours, t_numba = [], []
    for _ in range(15):  # interleaved rounds, best of each
        for times, fn in ((t_ours, ours), (t_numba, lambda p: nk.run(p, state))):
            t0 = time.perf_counter()
            for pts in scans:
                fn(pts)
            times.append((time.perf_counter() - t0) / len(scans) * 1e3)
    print_table("pillarize: numba anchor vs the kernel language (ms; KITTI scans)",
                ["", "numba", "ours"],
                [("import (fresh process)", imp, our_imp),
                 ("first call, empty cache (compile)", cold, our_cold),
                 ("first call, warm cache (load)", warm, our_warm),
                 ("per call, best round", min(t_numba), min(t_ours)),
                 ("ratio numba / ours", min(t_numba) / min(t_ours), 1.0)])


if __name__ == "__main__":
    main()
