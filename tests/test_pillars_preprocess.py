"""Native pillarize, PFN and scatter against the numpy references.

pillarize: every buffer and counter equal; scatter: bitwise; PFN: within 1e-5 relative (plus an
absolute floor of 1e-6 of the map's largest value, the float32 rounding of terms like x * w with
x ~ 70 m that both sides carry). Random clouds, the ten real KITTI frames, adversarial clouds, and
sequences of frames through one kernel object (the persistent buffers must be cleared exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.ops.pillars import PfnWeights, PillarConfig, reference
from cuvil_perception.ops.pillars.native import (SCATTER_ORDERS, PfnKernel, PillarizeKernel,
                                                 ScatterKernel)

SMALL = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0), max_pillars=600)
KITTI = PillarConfig()


def random_weights(channels: int = 64, seed: int = 0) -> PfnWeights:
    rng = np.random.default_rng(seed)
    return PfnWeights(rng.normal(0, 0.4, (10, channels)).astype(np.float32),
                      rng.uniform(0.5, 1.5, channels).astype(np.float32),
                      rng.normal(0, 0.2, channels).astype(np.float32),
                      rng.normal(0, 0.5, channels).astype(np.float32),
                      rng.uniform(0.2, 2.0, channels).astype(np.float32))


def random_cloud(n: int, config: PillarConfig, seed: int, margin: float = 2.0) -> np.ndarray:
    """Uniform points over the range +- margin (some fall outside), clustered half the time."""
    rng = np.random.default_rng(seed)
    low = np.array(config.point_cloud_range[:3]) - margin
    high = np.array(config.point_cloud_range[3:]) + margin
    xyz = rng.uniform(low, high, (n, 3))
    xyz[: n // 2] = xyz[rng.integers(0, 20, n // 2)] + rng.normal(0, 0.1, (n // 2, 3))
    return np.hstack([xyz, rng.uniform(0, 1, (n, 1))]).astype(np.float32)


def adversarial_clouds(config: PillarConfig) -> dict[str, np.ndarray]:
    x0, y0, z0, x1, y1, z1 = (np.float32(v) for v in config.point_cloud_range)
    below = lambda v: np.nextafter(v, np.float32(-np.inf))  # noqa: E731
    one_cell = np.tile([[1.0, 1.0, 0.0, 0.5]], (100, 1)) + np.linspace(0, 0.1, 100)[:, None] \
        * [1, 1, 0, 0]
    bounds = [[x0, y0, z0, 0.1], [x1, 0, 0, 0.2], [1, y1, 0, 0.3], [1, 0, z1, 0.4],
              [below(x1), below(y1), below(z1), 0.5], [x0, below(y1), z0, 0.6],
              [below(x0), 0, 0, 0.7], [1, below(y0), 0, 0.8]]
    rng = np.random.default_rng(7)
    budget = config.max_pillars * 10
    cells = rng.choice(config.num_cells, budget, replace=False)
    many = np.stack([x0 + (cells % config.nx + 0.5) * config.voxel_size[0],
                     y0 + (cells // config.nx + 0.5) * config.voxel_size[1],
                     np.zeros(budget), np.ones(budget)], axis=1)
    bad = random_cloud(500, config, seed=3)
    bad[::7, 0] = np.nan
    bad[1::11, 2] = np.inf
    bad[2::13, 3] = -np.inf
    bad[3::17, 1] = np.nan
    return {"empty": np.zeros((0, 4)), "one point": np.array([[5.0, 0.0, 0.0, 0.3]]),
            "one pillar": one_cell, "range bounds": np.array(bounds),
            "10x pillar budget": many, "nan and inf": bad}


def kitti(frame) -> np.ndarray:
    return np.fromfile(frame, np.float32).reshape(-1, 4)


def assert_same_pillars(native, ref) -> None:
    for name in ("counts", "num_points", "coords", "voxels"):
        np.testing.assert_array_equal(getattr(native, name), getattr(ref, name), err_msg=name)


def assert_pfn_close(native: np.ndarray, ref: np.ndarray, count: int) -> None:
    scale = float(np.abs(ref[:count]).max()) if count else 0.0
    np.testing.assert_allclose(native[:count], ref[:count], rtol=1e-5, atol=1e-6 * scale)


# -- pillarize ----------------------------------------------------------------------------
def test_pillarize_random_clouds_and_sequences():
    kernel = PillarizeKernel(SMALL).open()
    for seed in range(6):
        cloud = random_cloud(3000 * (seed + 1), SMALL, seed)
        assert_same_pillars(kernel(cloud), reference.pillarize(cloud, SMALL))
        assert (kernel.grid == -1).all()


def test_pillarize_real_frames(kitti_frames):
    kernel = PillarizeKernel(KITTI).open()
    for frame in kitti_frames + kitti_frames[:2]:  # the repeat checks clearing of a bigger frame
        points = kitti(frame)
        ref = reference.pillarize(points, KITTI)
        assert ref.count > 1000
        assert_same_pillars(kernel(points), ref)
    assert (kernel.grid == -1).all()


@pytest.mark.parametrize("name", list(adversarial_clouds(SMALL)))
def test_pillarize_adversarial(name):
    cloud = adversarial_clouds(SMALL)[name].astype(np.float32)
    kernel = PillarizeKernel(SMALL).open()
    kernel(random_cloud(5000, SMALL, 11))  # leave state behind first
    ref = reference.pillarize(cloud, SMALL)
    assert_same_pillars(kernel(cloud), ref)
    assert (kernel.grid == -1).all()
    stats = ref.stats()
    if name == "one pillar":
        assert stats["count"] == 1 and stats["dropped_points"] == 68
    if name == "range bounds":
        assert stats["count"] == 3 and stats["out_of_range"] == 5
        # Just below the upper bounds lands in the last cell (clamped, never out of the grid).
        assert list(ref.coords[1]) == [0, SMALL.ny - 1, SMALL.nx - 1]
    if name == "10x pillar budget":
        assert stats["count"] == SMALL.max_pillars
        assert stats["dropped_pillars"] == 9 * SMALL.max_pillars
    if name == "nan and inf":
        assert stats["invalid_points"] == int((~np.isfinite(cloud)).any(axis=1).sum()) > 0


def test_points_of_another_shape_are_input_errors():
    from cuvil_perception.errors import InputError

    for bad in (np.zeros((10, 5), np.float32), np.zeros(40, np.float32)):
        with pytest.raises(InputError, match=r"\[N, 4\]"):
            reference.pillarize(bad, SMALL)
        with pytest.raises(InputError, match=r"\[N, 4\]"):
            PillarizeKernel(SMALL)(bad)


def test_pillarize_keeps_first_appearance_order():
    points = np.array([[3.0, 0, 0, 1], [1.0, 0, 0, 2], [3.01, 0, 0, 3], [2.0, 0, 0, 4]],
                      np.float32)
    ref = reference.pillarize(points, SMALL)
    x_cells = ref.coords[: ref.count, 2]
    assert list(x_cells) == [int(3 / 0.16), int(1 / 0.16), int(2 / 0.16)]
    np.testing.assert_array_equal(ref.voxels[0, :2, 3], [1, 3])


@pytest.mark.parametrize("per_pillar", [1, 3, 5, 6])
def test_pillarize_any_points_per_pillar(per_pillar):
    """K not a multiple of 4: the kernel zeroes one row per store instead of four."""
    config = PillarConfig(SMALL.point_cloud_range, SMALL.voxel_size, max_pillars=600,
                          max_points_per_pillar=per_pillar)
    kernel = PillarizeKernel(config).open()
    clouds = [random_cloud(3000 * (seed % 3 + 1), config, seed) for seed in range(4)]
    for cloud in clouds + list(adversarial_clouds(config).values()) + clouds[:1]:
        cloud = cloud.astype(np.float32)
        assert_same_pillars(kernel(cloud), reference.pillarize(cloud, config))
    assert (kernel.grid == -1).all()


def test_pillarize_int32_grid_for_a_large_budget(kitti_frames):
    """Pillar ids past int16: the grid falls back to int32."""
    config = PillarConfig(max_pillars=40000)
    kernel = PillarizeKernel(config).open()
    assert kernel.grid.dtype == np.int32
    for frame in kitti_frames[:3] + kitti_frames[:1]:
        points = kitti(frame)
        assert_same_pillars(kernel(points), reference.pillarize(points, config))
    assert (kernel.grid == -1).all()


def test_pillarize_spare_rows_stay_outside_the_output():
    """Dropped points land in the spare rows past [P, K, 4]; the output view never shows them."""
    kernel = PillarizeKernel(SMALL).open()
    cloud = adversarial_clouds(SMALL)["one pillar"].astype(np.float32)
    got = kernel(cloud)
    assert got.voxels.shape == (SMALL.max_pillars, SMALL.max_points_per_pillar, 4)
    assert got.stats()["dropped_points"] == 68
    np.testing.assert_array_equal(got.voxels[0], cloud[:32])
    assert not got.voxels[1:].any()


# -- PFN ----------------------------------------------------------------------------------
def test_pfn_random_and_adversarial():
    weights = random_weights()
    kernel = PfnKernel(SMALL, weights).open()
    clouds = [random_cloud(4000, SMALL, s) for s in range(3)]
    clouds += [c.astype(np.float32) for c in adversarial_clouds(SMALL).values()]
    for cloud in clouds:
        pillars = reference.pillarize(cloud, SMALL)
        assert_pfn_close(kernel(pillars), reference.pfn(pillars, weights, SMALL), pillars.count)


def test_pfn_real_frames(kitti_frames):
    weights = random_weights(seed=1)
    kernel = PfnKernel(KITTI, weights).open()
    for frame in kitti_frames:
        pillars = reference.pillarize(kitti(frame), KITTI)
        assert_pfn_close(kernel(pillars), reference.pfn(pillars, weights, KITTI), pillars.count)


def test_pfn_padded_rows_enter_the_max_as_relu_bn_zero():
    # A one-point pillar: the max is over the point's row and relu(BN(0)) = relu(bias).
    weights = random_weights()
    pillars = reference.pillarize(np.array([[5.0, 0.5, -1.0, 0.3]], np.float32), SMALL)
    out = reference.pfn(pillars, weights, SMALL)[0]
    _, bias = weights.folded()
    assert (out >= np.maximum(bias, 0) - 1e-6).all()
    assert (out > np.maximum(bias, 0) + 1e-3).any()


# -- scatter ------------------------------------------------------------------------------
@pytest.mark.parametrize("order", SCATTER_ORDERS)
def test_scatter_bitwise_random_sequences(order):
    rng = np.random.default_rng(5)
    kernel = ScatterKernel(SMALL, order).open()
    for seed in range(5):
        pillars = reference.pillarize(random_cloud(2000 * (seed % 3 + 1), SMALL, seed), SMALL)
        features = rng.normal(size=(SMALL.max_pillars, 64)).astype(np.float32)
        features[:, 3] = -0.0  # signed zeros must survive
        got = kernel(features, pillars.coords, pillars.count)
        want = reference.scatter(features, pillars.coords, pillars.count, SMALL)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert not kernel.bitmap.any()
    empty = kernel(features, pillars.coords, 0)
    assert not empty.view(np.uint32).any()


def test_scatter_bitwise_real_frames(kitti_frames):
    rng = np.random.default_rng(6)
    kernel = ScatterKernel(KITTI).open()
    for frame in kitti_frames:
        pillars = reference.pillarize(kitti(frame), KITTI)
        features = rng.normal(size=(KITTI.max_pillars, 64)).astype(np.float32)
        got = kernel(features, pillars.coords, pillars.count)
        want = reference.scatter(features, pillars.coords, pillars.count, KITTI)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), frame.name


def test_scatter_bitwise_shared_cells_budget_and_payloads():
    """Frames that share most cells (a drive), the same frame twice, a full pillar budget, an
    empty frame; NaN payloads and -0.0 survive. Every order, each with its own state."""
    rng = np.random.default_rng(8)
    base = random_cloud(4000, SMALL, 21)
    jittered = base + rng.normal(0, 0.05, base.shape).astype(np.float32)
    budget = adversarial_clouds(SMALL)["10x pillar budget"].astype(np.float32)
    clouds = [base, jittered, jittered, budget, np.zeros((0, 4), np.float32), budget, base]
    frames = [reference.pillarize(c, SMALL) for c in clouds]
    assert frames[3].count == SMALL.max_pillars
    for order in SCATTER_ORDERS:
        kernel = ScatterKernel(SMALL, order).open()
        assert kernel.bev.ctypes.data % 64 == 0
        for k, pillars in enumerate(frames):
            features = rng.normal(size=(SMALL.max_pillars, 64)).astype(np.float32)
            bits = features.view(np.uint32)
            bits[::7, 5] = 0x7FC01234  # a NaN with a payload
            bits[::3, 9] = 0x80000000  # -0.0
            got = kernel(features, pillars.coords, pillars.count)
            want = reference.scatter(features, pillars.coords, pillars.count, SMALL)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (order, k)


def test_scatter_default_order_and_grids_without_whole_lines():
    assert ScatterKernel(SMALL).spec.name == "pillars.scatter_lines"
    narrow = PillarConfig(SMALL.point_cloud_range, SMALL.voxel_size, max_pillars=600,
                          num_features=8)
    kernel = ScatterKernel(narrow).open()  # falls back to the cell-granular kernel
    assert kernel.spec.name == "pillars.scatter"
    pillars = reference.pillarize(random_cloud(3000, narrow, 4), narrow)
    features = np.random.default_rng(9).normal(size=(600, 8)).astype(np.float32)
    np.testing.assert_array_equal(kernel(features, pillars.coords, pillars.count),
                                  reference.scatter(features, pillars.coords, pillars.count,
                                                    narrow))
    with pytest.raises(ValueError, match="multiples of 16"):
        ScatterKernel(narrow, "stream")
