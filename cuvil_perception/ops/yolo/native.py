"""The native YOLOv8 head: per-level raw outputs -> detections, into preallocated buffers.

Three kernels, chained from Python on the small candidate set:

1. ``yolo.scan`` (all anchors): max class logit > logit(conf) - margin -> candidate indices;
2. ``yolo.decode`` (candidates): best class, exact sigmoid(logit) > conf test, DFL, dist2bbox;
3. numpy on the survivors: ``classes`` filter, stable sort by score, ``max_nms`` cut;
4. ``yolo.nms``: greedy class-aware NMS, at most ``max_det`` kept.

Semantics are those of `reference.head` (ultralytics' rules), with one documented difference:
the best class is the first maximal *logit*, ultralytics takes the first maximal *sigmoid*; they
differ only when two different logits round to the same float32 score.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...compile import get_kernel
from ...errors import ConfigError
from ..logit_gate import logit_gate
from .kernel_decode import decode_spec
from .kernel_nms import nms_spec
from .kernel_scan import scan_spec
from .reference import MAX_WH


def check_options(conf: float, iou: float, max_det: int, max_nms: int) -> None:
    """ConfigError naming the first option out of range (ultralytics' own limits)."""
    if not 0.0 <= conf <= 1.0:
        raise ConfigError(f"conf must be within [0, 1], got {conf}")
    if not 0.0 <= iou <= 1.0:
        raise ConfigError(f"iou must be within [0, 1], got {iou}")
    if max_det < 1:
        raise ConfigError(f"max_det must be >= 1, got {max_det}")
    if max_nms < 1:
        raise ConfigError(f"max_nms must be >= 1, got {max_nms}")


class NativeHead:
    """Static-shape head for one model geometry.

    ``grids``: (h, w) per level; ``strides``: pixels per cell per level; ``nc`` classes. ``run``
    returns float32 [N, 6] rows (x1, y1, x2, y2, score, cls) in letterboxed-input pixels,
    N <= max_det, by descending score; the array is a view of an internal buffer, valid until the
    next call.
    """

    def __init__(self, grids: Sequence[tuple[int, int]], strides: Sequence[float], nc: int, *,
                 conf: float = 0.25, iou: float = 0.7, max_det: int = 300,
                 max_nms: int = 30000, classes: Sequence[int] | None = None,
                 agnostic: bool = False):
        check_options(conf, iou, max_det, max_nms)
        self.grids = tuple((int(h), int(w)) for h, w in grids)
        self.strides = tuple(float(s) for s in strides)
        self.nc = int(nc)
        self.n_anchors = sum(h * w for h, w in self.grids)
        self.conf, self.iou, self.max_det, self.max_nms = float(conf), float(iou), max_det, max_nms
        self.classes = None if classes is None else sorted({int(c) for c in classes})
        self.agnostic = bool(agnostic)
        self._kernels = None

    def kernels(self) -> list:
        """The KernelSpecs this head calls (for prewarming)."""
        return [scan_spec(self.grids, self.nc), decode_spec(self.grids, self.strides, self.nc),
                nms_spec()]

    def open(self) -> None:
        """Compile or load the kernels and allocate every buffer (sized for all anchors)."""
        self._kernels = [get_kernel(spec) for spec in self.kernels()]
        a, levels = self.n_anchors, len(self.grids)
        self._best = np.empty(a, np.float32)
        self._cand = np.empty(a, np.int64)
        self._boxes = np.empty((a, 4), np.float32)
        self._scores = np.empty(a, np.float32)
        self._cls = np.empty(a, np.float32)
        self._sorted_boxes = np.empty((a, 4), np.float32)
        self._sorted_cls = np.empty(a, np.float32)
        self._work = np.empty(5 * a, np.float32)
        self._suppressed = np.empty(a, np.uint8)
        self._keep = np.empty(self.max_det, np.int64)
        self._out = np.empty((self.max_det, 6), np.float32)
        self._box_table = np.empty(levels, np.uint64)
        self._cls_table = np.empty(levels, np.uint64)
        self._allowed = np.zeros(self.nc, bool)
        if self.classes is not None:
            self._allowed[[c for c in self.classes if 0 <= c < self.nc]] = True
        self._threshold = logit_gate(self.conf)
        self._offset = 0.0 if self.agnostic else float(MAX_WH)
        self.last_candidates = 0

    def run(self, box_levels: Sequence[np.ndarray], cls_levels: Sequence[np.ndarray]) -> np.ndarray:
        """Per-level float32 [1, 64, h, w] box and [1, nc, h, w] class logits -> [N, 6]."""
        if self._kernels is None:
            self.open()
        scan, decode, nms = self._kernels
        keep_alive = self._bind(box_levels, cls_levels)
        n = scan(self._cls_table.ctypes.data, self._best.ctypes.data, self._cand.ctypes.data,
                 self._threshold)
        m = decode(self._box_table.ctypes.data, self._cls_table.ctypes.data,
                   self._cand.ctypes.data, n, self.conf, self._boxes.ctypes.data,
                   self._scores.ctypes.data, self._cls.ctypes.data)
        del keep_alive
        self.last_candidates = m
        order = self._order(m)
        count = len(order)
        np.take(self._boxes, order, axis=0, out=self._sorted_boxes[:count])
        np.take(self._cls, order, out=self._sorted_cls[:count])
        kept = nms(self._sorted_boxes.ctypes.data, self._sorted_cls.ctypes.data, count,
                   self._offset, self.iou, self.max_det, self._work.ctypes.data,
                   self._suppressed.ctypes.data, self._keep.ctypes.data)
        keep = self._keep[:kept]
        out = self._out[:kept]
        out[:, :4] = self._sorted_boxes[keep]
        out[:, 4] = self._scores[order[keep]]
        out[:, 5] = self._sorted_cls[keep]
        return out

    def _bind(self, box_levels, cls_levels) -> list:
        """Point the level tables at C-contiguous float32 copies (no copy if already so)."""
        if len(box_levels) != len(self.grids) or len(cls_levels) != len(self.grids):
            raise ValueError(f"expected {len(self.grids)} levels of box and class outputs")
        arrays = []
        for i, ((h, w), box, cls) in enumerate(zip(self.grids, box_levels, cls_levels)):
            box = np.ascontiguousarray(box, dtype=np.float32)
            cls = np.ascontiguousarray(cls, dtype=np.float32)
            if box.size != 64 * h * w or cls.size != self.nc * h * w:
                raise ValueError(f"level {i}: box {box.shape} / class {cls.shape} do not match "
                                 f"[64, {h}, {w}] / [{self.nc}, {h}, {w}]")
            self._box_table[i] = box.ctypes.data
            self._cls_table[i] = cls.ctypes.data
            arrays += [box, cls]
        return arrays

    def _order(self, m: int) -> np.ndarray:
        """Survivor positions after the class filter, by descending score (stable), <= max_nms."""
        scores = self._scores[:m]
        if self.classes is not None:
            idx = np.flatnonzero(self._allowed[self._cls[:m].astype(np.int64)])
            order = idx[np.argsort(-scores[idx], kind="stable")]
        else:
            order = np.argsort(-scores, kind="stable")
        return order[: self.max_nms]
