"""PillarConfig / HeadConfig validation and the anchor table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cuvil_perception.errors import ConfigError
from cuvil_perception.ops.pillars import HeadConfig, PillarConfig, reference


def test_kitti_grid_is_derived():
    config = PillarConfig()
    assert (config.nx, config.ny, config.nz) == (432, 496, 1)
    assert config.num_cells == 432 * 496


@pytest.mark.parametrize("rng, voxel, words", [
    ((0, -10, -3, 0, 10, 1), (0.16, 0.16, 4), "empty along x"),
    ((0, 10, -3, 20, -10, 1), (0.16, 0.16, 4), "empty along y"),
    ((0, -10, -3, 10, 10, 1), (0.3, 0.16, 4), "does not divide"),
    ((0, -10.24, -3, 10.24, 10.24, 1), (0.16, 0.16, 1), "span the whole range height"),
    ((0, -10.24, -3, 10.24, 10.24, 1), (0.16, 0.0, 4), "must be > 0"),
    ((0, -10, -3, 10, 10), (0.16, 0.16, 4), "6 finite numbers"),
    ((0, -10, -3, math.nan, 10, 1), (0.16, 0.16, 4), "6 finite numbers"),
])
def test_bad_grids_are_config_errors(rng, voxel, words):
    with pytest.raises(ConfigError, match=words):
        PillarConfig(rng, voxel)


def test_bad_budgets_are_config_errors():
    with pytest.raises(ConfigError, match="max_pillars"):
        PillarConfig(max_pillars=0)
    with pytest.raises(ConfigError, match="nms_post"):
        HeadConfig(nms_post=0)
    with pytest.raises(ConfigError, match="stride"):
        HeadConfig(stride=5).map_size(PillarConfig())


def test_anchor_table_matches_openpcdet_layout():
    config, head = PillarConfig(), HeadConfig()
    table = reference.anchors(config, head)
    assert table.shape == (248 * 216 * 6, 7) and table.dtype == np.float32
    cell = table[:6]
    np.testing.assert_allclose(cell[:, 0], 0.0)
    np.testing.assert_allclose(cell[:, 1], -39.68)
    np.testing.assert_allclose(cell[0, 3:6], (3.9, 1.6, 1.56))
    np.testing.assert_allclose(cell[0, 2], -1.78 + 1.56 / 2)
    np.testing.assert_allclose(cell[2, 3:6], (0.8, 0.6, 1.73))
    np.testing.assert_allclose(cell[:, 6], [0, math.pi / 2] * 3, rtol=1e-6)
    # x = min + i (max - min) / (W - 1): the last column sits on x_max.
    np.testing.assert_allclose(table[(215) * 6, 0], 69.12, rtol=1e-6)
    np.testing.assert_allclose(table[(1 * 216) * 6, 1], -39.68 + 79.36 / 247, rtol=1e-6)
