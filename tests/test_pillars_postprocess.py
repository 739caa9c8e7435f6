"""Native decode and rotated NMS against the numpy references.

decode: same candidates (anchor indices, labels) and values within 1e-5 relative; NMS: identical
kept indices. Random head maps, the head maps of the bundled random-weight model on the ten real
KITTI frames, and adversarial boxes (duplicates, score ties, zero-size, touching, empty).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cuvil_perception.ops.pillars import HeadConfig, PfnWeights, PillarConfig, native, reference
from cuvil_perception.geometry import rotated_bev_iou
from cuvil_perception.ops.pillars.native import DecodeKernel, NmsKernel

SMALL = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0), max_pillars=600)
HEAD = HeadConfig()


def random_maps(config, head, seed: int, bias: float):
    rng = np.random.default_rng(seed)
    height, width = head.map_size(config)
    a = head.anchors_per_cell
    cls = (rng.normal(size=(1, height, width, a * head.num_classes)) + bias).astype(np.float32)
    box = rng.normal(0, 0.3, (1, height, width, a * 7)).astype(np.float32)
    dirs = rng.normal(size=(1, height, width, a * 2)).astype(np.float32)
    return cls, box, dirs


def assert_same_candidates(got, want) -> None:
    assert (got.count, got.overflow) == (want.count, want.overflow)
    n = want.count
    np.testing.assert_array_equal(got.anchor[:n], want.anchor[:n])
    np.testing.assert_array_equal(got.labels[:n], want.labels[:n])
    np.testing.assert_allclose(got.scores[:n], want.scores[:n], rtol=1e-5)
    np.testing.assert_allclose(got.boxes[:n], want.boxes[:n], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [-8.0, -4.0, -2.0])
def test_decode_random_maps(bias):
    table = reference.anchors(SMALL, HEAD)
    kernel = DecodeKernel(SMALL, HEAD, table).open()
    cap = HEAD.candidate_capacity(SMALL)
    for seed in range(2):
        maps = random_maps(SMALL, HEAD, seed, bias)
        assert_same_candidates(kernel(*maps), reference.decode_boxes(*maps, table, HEAD, cap))


def test_decode_counts_overflow_of_a_capped_buffer():
    head = HeadConfig(max_candidates=50)
    table = reference.anchors(SMALL, head)
    maps = random_maps(SMALL, head, 0, -1.0)
    want = reference.decode_boxes(*maps, table, head, 50)
    assert want.count == 50 and want.overflow > 0
    assert_same_candidates(DecodeKernel(SMALL, head, table).open()(*maps), want)


def test_decode_heading_uses_direction_bins():
    # Heading r = 0: limit_period(0 - 0.78539, 0, pi) + 0.78539 = pi, plus pi for bin 1 (the
    # OpenPCDet convention: headings land in [0.785, 0.785 + 2 pi)).
    table = reference.anchors(SMALL, HEAD)
    kernel = DecodeKernel(SMALL, HEAD, table).open()
    for bins, heading in (((1.0, 0.0), math.pi), ((0.0, 1.0), 2 * math.pi)):
        cls, box, dirs = random_maps(SMALL, HEAD, 1, -20.0)
        cls[0, 0, 0, 0] = 5.0  # anchor 0 (Car, rotation 0) only
        box[0, 0, 0, :7] = 0.0
        dirs[0, 0, 0, :2] = bins
        cand = kernel(cls, box, dirs)
        assert cand.count == 1 and cand.labels[0] == 0
        np.testing.assert_allclose(cand.boxes[0, 6], heading, rtol=1e-6)
        np.testing.assert_allclose(cand.boxes[0, 3:6], (3.9, 1.6, 1.56), rtol=1e-6)


def test_nms_random_boxes_identical_indices():
    rng = np.random.default_rng(2)
    kernel = NmsKernel(HEAD).open()
    for n in (0, 1, 50, 600):
        boxes = np.zeros((max(n, 1), 7), np.float32)
        boxes[:n, :2] = rng.uniform(0, 30, (n, 2))
        boxes[:n, 3:6] = rng.uniform(0.5, 4, (n, 3))
        boxes[:n, 6] = rng.uniform(-np.pi, np.pi, n)
        scores = rng.uniform(0.1, 1, max(n, 1)).astype(np.float32)
        want = reference.nms_bev_rotated(boxes, scores, n, HEAD)
        np.testing.assert_array_equal(kernel(boxes, scores, n), want)


def test_nms_adversarial_boxes():
    car = [5.0, 5.0, -1.0, 3.9, 1.6, 1.5, 0.3]
    boxes = np.array([car, car,                                   # exact duplicate
                      [5.0 + 3.9, 5.0, -1, 3.9, 1.6, 1.5, 0.0],   # touching-ish neighbour
                      [20.0, 20.0, -1, 0.0, 0.0, 1.5, 0.0],       # zero-size
                      [20.0, 20.0, -1, 0.0, 0.0, 1.5, 0.0],
                      [40.0, 40.0, -1, 2.0, 2.0, 1.5, 0.0],
                      [40.0, 40.0, -1, 2.0, 2.0, 1.5, math.pi / 4]], np.float32)
    scores = np.array([0.5, 0.5, 0.5, 0.9, 0.9, 0.3, 0.3], np.float32)  # ties everywhere
    want = reference.nms_bev_rotated(boxes, scores, len(boxes), HEAD)
    assert list(want[:3]) == [3, 4, 0]  # ties: lower index first; zero-size never suppresses
    assert 1 not in want and 6 not in want
    np.testing.assert_array_equal(NmsKernel(HEAD).open()(boxes, scores, len(boxes)), want)


def test_nms_keeps_at_most_post():
    head = HeadConfig(nms_post=5)
    boxes = np.zeros((40, 7), np.float32)
    boxes[:, 0] = np.arange(40) * 10.0
    boxes[:, 3:6] = 1.0
    scores = np.linspace(1, 0.2, 40).astype(np.float32)
    want = reference.nms_bev_rotated(boxes, scores, 40, head)
    assert list(want) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(NmsKernel(head).open()(boxes, scores, 40), want)


def test_rotated_iou_known_values():
    square = [0, 0, 0, 2, 2, 1, 0]
    assert rotated_bev_iou(square, square) == pytest.approx(1.0)
    assert rotated_bev_iou(square, [1, 0, 0, 2, 2, 1, 0]) == pytest.approx(2 / 6)
    # A unit-area diamond inside a 2x2 square: overlap = diamond (area 2), union = 4.
    diamond = [0, 0, 0, math.sqrt(2), math.sqrt(2), 1, math.pi / 4]
    assert rotated_bev_iou(square, diamond) == pytest.approx(0.5)
    assert rotated_bev_iou(square, [3, 0, 0, 2, 2, 1, 0]) == 0.0


def test_real_frames_through_the_bundled_model(kitti_frames):
    from cuvil_perception.ops.pillars import PointPillars
    from cuvil_perception.ops.pillars.op import RANDOM_MODEL

    model = PointPillars.from_onnx(RANDOM_MODEL).open()
    cap = model.head.candidate_capacity(model.config)
    for frame in kitti_frames:
        maps = model.runner(model.bev(np.fromfile(frame, np.float32).reshape(-1, 4)))
        want = reference.decode_boxes(*maps, model.anchors, model.head, cap)
        got = model.decode(*maps)
        assert want.count > 0
        assert_same_candidates(got, want)
        kept = reference.nms_bev_rotated(want.boxes, want.scores, want.count, model.head)
        np.testing.assert_array_equal(model.nms(want.boxes, want.scores, want.count), kept)


def test_module_level_twins_do_not_alias_each_other():
    """Two calls of a module-level twin with one config: the first result stays as it was."""
    rng = np.random.default_rng(7)
    first_points = rng.uniform([0, -10, -3, 0], [20, 10, 1, 1], (3000, 4)).astype(np.float32)
    first = native.pillarize(first_points, SMALL)
    kept = first.voxels.copy(), first.counts.copy()
    native.pillarize(first_points[:100] * 0.5, SMALL)
    np.testing.assert_array_equal(first.voxels, kept[0])
    np.testing.assert_array_equal(first.counts, kept[1])
    features = rng.normal(size=(600, 64)).astype(np.float32)
    ref = reference.pillarize(first_points, SMALL)
    grid = native.scatter(features, ref.coords, ref.count, SMALL)
    kept_grid = grid.copy()
    native.scatter(features * 2.0, ref.coords, ref.count, SMALL)
    np.testing.assert_array_equal(grid, kept_grid)


def test_module_level_twins_match_reference():
    points = np.random.default_rng(4).uniform([0, -10, -3, 0], [20, 10, 1, 1], (3000, 4))
    points = points.astype(np.float32)
    ref = reference.pillarize(points, SMALL)
    got = native.pillarize(points, SMALL)
    np.testing.assert_array_equal(got.voxels, ref.voxels)
    weights = PfnWeights(*(np.random.default_rng(6).uniform(0.5, 1.5, shape).astype(np.float32)
                           for shape in ((10, 64), 64, 64, 64, 64)))
    np.testing.assert_allclose(native.pfn(ref, weights, SMALL), reference.pfn(ref, weights, SMALL),
                               rtol=1e-5, atol=1e-4)
    features = np.random.default_rng(5).normal(size=(600, 64)).astype(np.float32)
    np.testing.assert_array_equal(native.scatter(features, ref.coords, ref.count, SMALL),
                                  reference.scatter(features, ref.coords, ref.count, SMALL))
    table = reference.anchors(SMALL, HEAD)
    maps = random_maps(SMALL, HEAD, 3, -3.0)
    cap = HEAD.candidate_capacity(SMALL)
    want = reference.decode_boxes(*maps, table, HEAD, cap)
    assert_same_candidates(native.decode_boxes(*maps, table, HEAD, cap), want)
    np.testing.assert_array_equal(
        native.nms_bev_rotated(want.boxes, want.scores, want.count, HEAD),
        reference.nms_bev_rotated(want.boxes, want.scores, want.count, HEAD))
