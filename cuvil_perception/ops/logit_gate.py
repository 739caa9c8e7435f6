"""The logit gate both detectors' native kernels scan with before the exact score test.

A kernel compares raw class logits with ``logit_gate(threshold)`` instead of taking a sigmoid
per anchor; the exact ``score >= threshold`` (PointPillars) or ``score > conf`` (YOLO) test is
redone on the float32 score of what passes. So the gate must never reject a logit whose
float32 sigmoid passes: it sits below logit(threshold) by a margin of at least 1e-3, widened
near 0 and 1 where one float32 step of the sigmoid spans more than 1e-3 of logit (e.g. 0.99999).
"""

from __future__ import annotations

import math


def logit_gate(threshold: float) -> float:
    """The logit (float) an anchor's best class must reach to be looked at; -inf for a threshold
    <= 0, +inf for >= 1. Between about 4e-4 and 0.9996 it is exactly logit(threshold) - 1e-3."""
    if threshold <= 0.0:
        return -math.inf
    if threshold >= 1.0:
        return math.inf
    margin = max(1e-3, 4e-7 / (threshold * (1.0 - threshold)))
    return math.log(threshold / (1.0 - threshold)) - margin
