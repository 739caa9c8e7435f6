"""The pillar kernels written with buffer slices (``weights[k, :]``, ``out[p, :] = acc``) run
uncompiled (``py_func``) and give the compiled kernels' bytes: slice reads are values and stay
float32 in both modes. Small random inputs; every configuration of conv_scatter's chains."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.ops.pillars import PillarConfig
from cuvil_perception.ops.pillars.kernel_conv_scatter import conv_scatter, conv_scatter_spec
from cuvil_perception.ops.pillars.kernel_pfn import pfn, pfn_spec
from cuvil_perception.ops.pillars.types import ConvLayer

TINY = PillarConfig((0.0, -2.56, -3.0, 2.56, 2.56, 1.0), (0.16, 0.16, 4.0), max_pillars=64,
                    num_features=32)


def _both(kernel, arrays: list, scalars: dict, static: dict) -> tuple[list, list]:
    """(compiled, uncompiled) results of ``kernel`` on copies of ``arrays``; ``scalars``: the
    run-time scalars by position."""
    results = []
    static = {k: v for k, v in static.items() if k != "_debug"}  # (CUVIL_KERNEL_DEBUG=1 runs)
    for fn in (kernel, kernel.py_func):
        args = [a.copy() for a in arrays]
        for at, value in sorted(scalars.items()):
            args.insert(at, value)
        fn(*args, **static)
        results.append([a for a in args if isinstance(a, np.ndarray)])
    return results[0], results[1]


def test_pfn_uncompiled_gives_the_compiled_bytes():
    rng = np.random.default_rng(5)
    spec, p, k = pfn_spec(TINY), 40, TINY.max_points_per_pillar
    voxels = rng.uniform(-2.0, 2.0, (p, k, 4)).astype(np.float32)
    coords = np.stack([np.zeros(p), rng.integers(0, 32, p), rng.integers(0, 16, p)], 1)
    counts = rng.integers(1, k + 1, p).astype(np.int32)
    counts[:3] = k  # full pillars: no padded row enters the max
    weights = rng.normal(0, 0.5, (14, TINY.num_features)).astype(np.float32)
    bias = rng.normal(0, 0.3, TINY.num_features).astype(np.float32)
    out = np.zeros((p, TINY.num_features), np.float32)
    got, want = _both(pfn, [voxels, coords.astype(np.int32), counts, weights, bias, out], {3: p},
                      spec.static)
    assert got[-1].dtype == want[-1].dtype == np.float32
    np.testing.assert_array_equal(got[-1].view(np.int32), want[-1].view(np.int32))


@pytest.mark.parametrize("cout", [16, 20, 8, 64])  # ways 4, 2, 4, 1; a tail chunk at 20
def test_conv_scatter_uncompiled_gives_the_compiled_bytes(cout):
    rng = np.random.default_rng(cout)
    cin, p = 12, 30
    layer = ConvLayer(rng.normal(0, 0.3, (cout, cin, 3, 3)).astype(np.float32),
                      rng.normal(0, 0.3, cout).astype(np.float32), (2, 2), (1, 1, 1, 1))
    static = conv_scatter_spec(TINY, layer).static
    cells = static["ho"] * static["wo"]
    weights = np.ascontiguousarray(layer.weight.transpose(2, 3, 1, 0).reshape(9, cin, cout))
    features = rng.normal(size=(p, cin)).astype(np.float32)
    picked = rng.choice(TINY.ny * TINY.nx, p, replace=False)
    coords = np.stack([np.zeros(p, int), picked // TINY.nx, picked % TINY.nx], 1).astype(np.int32)
    state = [np.tile(np.maximum(layer.bias, 0), (cells, 1)), np.zeros(cells, np.uint8),
             np.zeros(cells, np.int32), np.zeros(cells, np.int32), np.zeros(1, np.int64)]
    for frame in (p, p // 2):  # two frames: the second clears what the first reached
        got, want = _both(conv_scatter, [features[:frame], coords[:frame], weights, layer.bias,
                                         *state], {2: frame}, static)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        state = got[4:]
    assert got[4].dtype == np.float32 and np.any(got[4] != np.maximum(layer.bias, 0))
