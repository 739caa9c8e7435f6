"""The custom-op tutorial's benchmark: example ground removal, numpy twin vs native kernel.

Run: ``python benchmarks/ground_removal.py``. Real KITTI scans from ../shared/data when present
(else random points). Times are medians over interleaved runs; on a shared machine read the
ratio, not the milliseconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))
from _util import measure, print_machine, print_table  # noqa: E402
from ground_removal import reference  # noqa: E402
from ground_removal.kernel import remove_ground  # noqa: E402
from _cases import kitti_points  # noqa: E402

from cuvil_perception.compile import get_kernel  # noqa: E402

STATIC = dict(x0=0.0, y0=-39.68, cell=1.0, nx=70, ny=80, height=0.25, capacity=200_000,
              cells=70 * 80)


def main() -> None:
    print_machine()
    rng = np.random.default_rng(0)
    rows = []
    kernel = get_kernel(remove_ground.spec(**STATIC))
    low = np.empty(STATIC["cells"], np.float32)
    out = np.zeros((STATIC["capacity"], 4), np.float32)
    for index in range(3):
        pts = kitti_points(rng, index)
        addr = (pts.ctypes.data, len(pts), low.ctypes.data, out.ctypes.data)
        numpy_t = measure(lambda: reference.remove_ground(pts, len(pts), low, out, **STATIC),
                          runs=5)
        native_t = measure(lambda: kernel(*addr), runs=5, number=20)
        moved = len(pts) * 16 * 2  # read twice
        rows.append((f"scan {index} ({len(pts)} points)", numpy_t.median_ms,
                     native_t.median_ms, numpy_t.median_ms / native_t.median_ms,
                     moved / native_t.median_ms / 1e6))
    print_table("example.ground_removal: numpy twin vs native kernel (median ms)",
                ["input", "numpy ms", "native ms", "speed-up", "GB/s read"], rows)


if __name__ == "__main__":
    main()
