"""The scatter kernels run uncompiled (``py_func``, the debugging path of the kernel language) and
give the compiled kernels' bytes: every order, two frames through one state on a small grid."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.ops.pillars import PillarConfig, reference
from cuvil_perception.ops.pillars import kernel_scatter, kernel_scatter_lines
from cuvil_perception.ops.pillars.native import LINE_ORDERS, SCATTER_ORDERS, ScatterKernel

TINY = PillarConfig((0.0, -2.56, -3.0, 2.56, 2.56, 1.0), (0.16, 0.16, 4.0), max_pillars=64,
                    num_features=32)


def _frames(seed: int):
    rng = np.random.default_rng(seed)
    lo, hi = np.array(TINY.point_cloud_range[:3]), np.array(TINY.point_cloud_range[3:])
    for n in (300, 120):
        xyz = rng.uniform(lo, hi, (n, 3))
        points = np.hstack([xyz, rng.uniform(0, 1, (n, 1))]).astype(np.float32)
        pillars = reference.pillarize(points, TINY)
        features = rng.normal(size=(TINY.max_pillars, TINY.num_features)).astype(np.float32)
        features.view(np.uint32)[::5, 3] = 0x7FC01234  # a NaN payload moves unchanged
        yield features, pillars


def _interpreted(kernel: ScatterKernel, features, pillars) -> np.ndarray:
    lines = kernel.spec.name == "pillars.scatter_lines"
    fn = (kernel_scatter_lines.scatter_lines if lines else kernel_scatter.scatter).py_func
    args = [features, pillars.coords, pillars.count, kernel.bev.reshape(-1), kernel.prev_cells,
            kernel.prev_count, kernel.bitmap.view(np.int64), kernel.cell_pillar, kernel.cells,
            kernel.pids]
    if lines:
        args += [kernel.union[0], kernel.union[1], kernel.gathered, kernel.rank]
    with np.errstate(over="ignore"):  # bits & (bits - 1) wraps at bit 63, as compiled
        fn(*args, **kernel_scatter.scatter.static_params(kernel.spec))
    return kernel.bev


@pytest.mark.parametrize("order", SCATTER_ORDERS)
def test_scatter_uncompiled_equals_compiled(order):
    compiled, plain = ScatterKernel(TINY, order).open(), ScatterKernel(TINY, order)
    assert (order in LINE_ORDERS) == (plain.spec.name == "pillars.scatter_lines")
    for features, pillars in _frames(3):
        want = compiled(features, pillars.coords, pillars.count)
        got = _interpreted(plain, features, pillars)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), order
        assert np.array_equal(plain.prev_cells, compiled.prev_cells)
        assert not plain.bitmap.any()
