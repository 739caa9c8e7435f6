"""One logit gate for both detectors: it never rejects a logit whose float32 score passes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cuvil_perception.ops.logit_gate import logit_gate
from cuvil_perception.ops.pillars import config as pillars_config
from cuvil_perception.ops.yolo import native as yolo_native
from cuvil_perception.ops.yolo import reference as yolo_reference

LOGITS = np.linspace(-20, 20, 400001, dtype=np.float32)
# 0.99999 and up: one float32 step of the sigmoid spans more than 1e-3 of logit there (a fixed
# 1e-3 margin dropped passing PointPillars anchors).
THRESHOLDS = (1e-5, 0.001, 0.1, 0.25, 0.5, 0.9, 0.999, 0.99999, 0.999999)


def _pillars_scores(best: np.ndarray) -> np.ndarray:
    """PointPillars' float32 score of a best logit, as ``reference.decode_boxes`` computes it."""
    return (1.0 / (1.0 + np.exp(-best.astype(np.float64)))).astype(np.float32)


def test_both_detectors_use_the_one_gate():
    assert pillars_config.logit_gate is logit_gate and yolo_native.logit_gate is logit_gate


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_gate_never_drops_a_passing_anchor(threshold):
    yolo_passing = LOGITS[yolo_reference.sigmoid(LOGITS) > np.float32(threshold)]
    assert yolo_passing.min() > logit_gate(threshold)  # the scan kernel compares in float32 too
    pillars_passing = LOGITS[_pillars_scores(LOGITS) >= np.float32(threshold)]
    assert pillars_passing.min() >= np.float32(logit_gate(threshold))


def test_gate_is_the_former_fixed_margin_between_extremes_and_infinite_at_the_ends():
    """0.1 (our configs) and 0.25 gate exactly as before: same kernels, same bytes."""
    for threshold in (0.001, 0.1, 0.25, 0.5, 0.9, 0.999):
        assert logit_gate(threshold) == math.log(threshold / (1.0 - threshold)) - 1e-3
    assert logit_gate(0.0) == -math.inf and logit_gate(1.0) == math.inf
