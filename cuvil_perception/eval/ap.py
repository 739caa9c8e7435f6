"""Average precision of detections against ground truth, over the frames of a drive.

Matching (per frame and class, COCO style): detections in descending score order (stable: ties
keep their input order) each take the not-yet-matched ground-truth box with the highest IoU;
IoU >= ``iou_threshold`` (inclusive) makes a true positive, anything else a false positive.
A detection that matches no counted box but an *ignored* one (too small, outside the sensor's
range) is dropped: neither a true nor a false positive. Ignored boxes do not count in the
ground-truth total.

Interpolation (``method``):

- ``"all"`` (default): all-point interpolation of PASCAL VOC 2010+ — the area under the
  precision envelope (precision made monotone from the right) over every recall step.
- ``"r40"``: KITTI's 40 recall points — the mean over r in {1/40, 2/40, ..., 1} of the highest
  precision at recall >= r (0 where that recall is never reached).

A class without ground truth has AP NaN (undefined, shown as "n/a"); a class with ground truth
and no detection has AP 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

METHODS = ("all", "r40")
METHOD_NAMES = {"all": "all-point interpolation (PASCAL VOC 2010+)",
                "r40": "40 recall points (KITTI R40)"}


@dataclass
class ClassAP:
    """AP of one class: ``num_gt`` ground-truth boxes (ignored ones excluded), ``num_det``
    scored detections (dropped ones excluded), ``tp`` true positives.

    ``scores`` float64 [num_det] and ``hits`` bool [num_det] are the matched detections in frame
    order (as accumulated, not sorted): what ``pool`` needs to score several drives together."""

    cls: int
    name: str
    ap: float
    num_gt: int
    num_det: int
    tp: int
    scores: np.ndarray | None = field(default=None, repr=False, compare=False)
    hits: np.ndarray | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {"class": self.name, "class_id": self.cls,
                "ap": None if np.isnan(self.ap) else round(float(self.ap), 6),
                "num_gt": self.num_gt, "num_det": self.num_det, "tp": self.tp}


@dataclass
class Accumulator:
    """Collects per-frame matches of one class; ``result()`` gives its ``ClassAP``."""

    cls: int
    name: str
    scores: list = field(default_factory=list)
    hits: list = field(default_factory=list)
    num_gt: int = 0

    def add(self, scores: np.ndarray, hits: np.ndarray, num_gt: int) -> None:
        self.scores.append(np.asarray(scores, np.float64))
        self.hits.append(np.asarray(hits, bool))
        self.num_gt += int(num_gt)

    def result(self, method: str = "all") -> ClassAP:
        scores = np.concatenate(self.scores) if self.scores else np.zeros(0)
        hits = np.concatenate(self.hits) if self.hits else np.zeros(0, bool)
        order = np.argsort(-scores, kind="stable")
        ap = average_precision(hits[order], self.num_gt, method)
        return ClassAP(self.cls, self.name, ap, self.num_gt, int(len(hits)), int(hits.sum()),
                       scores, hits)


def pool(results: list[ClassAP], method: str = "all") -> ClassAP:
    """AP of one class over several runs (drives) scored separately: their matched detections
    and ground-truth counts pooled, in the order given — the same AP as scoring all their frames
    in one run, not the mean of the runs' APs. Every result needs ``scores`` and ``hits``."""
    if not results:
        raise ValueError("pool() needs at least one ClassAP")
    acc = Accumulator(results[0].cls, results[0].name)
    for result in results:
        if result.scores is None or result.hits is None or result.cls != acc.cls:
            raise ValueError(f"cannot pool class {result.name!r}: no matches kept, or another "
                             "class")
        acc.add(result.scores, result.hits, result.num_gt)
    return acc.result(method)


def average_precision(hits: np.ndarray, num_gt: int, method: str = "all") -> float:
    """AP from true-positive flags bool [K] in descending score order and the ground-truth
    count (see the module docstring for ``method``)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if num_gt <= 0:
        return float("nan")
    hits = np.asarray(hits, bool)
    if hits.size == 0:
        return 0.0
    tp = np.cumsum(hits)
    recall = tp / num_gt
    precision = tp / np.arange(1, len(hits) + 1)
    if method == "r40":
        points = np.linspace(1 / 40, 1.0, 40)
        best = [precision[recall >= r - 1e-12].max(initial=0.0) for r in points]
        return float(np.mean(best))
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]  # the precision envelope
    steps = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[steps + 1] - mrec[steps]) * mpre[steps + 1]))


def match_frame(scores: np.ndarray, iou: np.ndarray, ignored: np.ndarray,
                iou_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """One frame, one class: (kept scores [K'], hit flags [K']) of detections with ``scores``
    [K] against ground truth with IoU matrix ``iou`` [K, G] and ``ignored`` flags [G].

    A detection takes the best free counted box with IoU >= threshold; failing that, the best
    free ignored one (then it is dropped, as COCO does); failing both it is a false positive."""
    scores = np.asarray(scores, np.float64).reshape(-1)
    ignored = np.asarray(ignored, bool).reshape(-1)
    taken = np.zeros(len(ignored), bool)
    kept, hits = [], []
    for k in np.argsort(-scores, kind="stable"):
        match = -1
        for pool in (~ignored, ignored):
            overlap = np.where(taken | ~pool, -1.0, iou[k]) if len(ignored) else np.zeros(0)
            if overlap.size and overlap.max() >= iou_threshold:
                match = int(np.argmax(overlap))
                break
        if match >= 0:
            taken[match] = True
            if ignored[match]:
                continue  # matched a don't-care box: neither TP nor FP
        kept.append(scores[k])
        hits.append(match >= 0)
    return np.array(kept, np.float64), np.array(hits, bool)


IouFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def evaluate(frames: list[tuple], iou_fn: IouFn, class_names: tuple[str, ...],
             iou_threshold: float = 0.5, method: str = "all",
             classes: tuple[int, ...] | None = None) -> list[ClassAP]:
    """AP per class over ``frames``.

    Each frame is (det_boxes [K, D], det_scores [K], det_classes [K], gt_boxes [G, D],
    gt_classes [G], gt_ignored [G]) — boxes in whatever geometry ``iou_fn(a [K, D], b [G, D])
    -> [K, G]`` understands. ``classes`` restricts the evaluated classes (default: all).
    """
    wanted = tuple(range(len(class_names))) if classes is None else tuple(classes)
    acc = {c: Accumulator(c, class_names[c]) for c in wanted}
    for det_boxes, det_scores, det_cls, gt_boxes, gt_cls, gt_ignored in frames:
        det_cls = np.asarray(det_cls).astype(np.int64).reshape(-1)
        gt_cls = np.asarray(gt_cls).astype(np.int64).reshape(-1)
        gt_ignored = np.asarray(gt_ignored, bool).reshape(-1)
        for c in wanted:
            d, g = det_cls == c, gt_cls == c
            iou = iou_fn(det_boxes[d], gt_boxes[g])
            kept, hits = match_frame(det_scores[d], iou, gt_ignored[g], iou_threshold)
            acc[c].add(kept, hits, int((~gt_ignored[g]).sum()))
    return [acc[c].result(method) for c in wanted]


def mean_ap(results: list[ClassAP]) -> float:
    """Mean AP over the classes that have ground truth (NaN when none has)."""
    values = [r.ap for r in results if not np.isnan(r.ap)]
    return float(np.mean(values)) if values else float("nan")
