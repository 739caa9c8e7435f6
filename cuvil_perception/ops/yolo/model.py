"""`YoloV8`: an ultralytics YOLOv8 detect export, cut before its head, with the native head.

    det = YoloV8.from_onnx("yolov8n.onnx", conf=0.25, iou=0.7)
    rows = det.detect(image_bgr)   # float32 [N, 6]: x1, y1, x2, y2, score, cls (image pixels)

``detect`` = letterbox (numpy/OpenCV, ultralytics' LetterBox) -> trunk (OpenCV DNN or ONNX
Runtime) -> native head (or, when the head could not be cut, the full ``[1, 4 + nc, A]`` output
and `postprocess`) -> scale_boxes back to the original image.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import InputError
from ..onnx_runner import OnnxRunner
from . import reference
from .native import NativeHead, check_options
from .surgery import (HeadNotCuttable, class_names, cut_model, find_head, inspect_interface,
                      load_model)

log = logging.getLogger(__name__)


class YoloV8:
    """A loaded detector. Build with `from_onnx`.

    Attributes: ``input_hw`` (network input, pixels), ``nc``, ``cut`` (True when the native head
    runs; False means the full-output fallback), ``fallback_reason`` (why not cut, or None),
    ``layout`` (the head geometry when cut), ``timings_ms`` (letterbox/trunk/head of the last call),
    ``names`` (class names from the export's metadata, or None).
    """

    def __init__(self, runner: OnnxRunner, input_hw: tuple[int, int], nc: int,
                 head: NativeHead | None, options: dict, fallback_reason: str | None,
                 layout=None):
        self.runner = runner
        self.input_hw = input_hw
        self.nc = nc
        self.head = head
        self.options = options
        self.fallback_reason = fallback_reason
        self.layout = layout
        self.timings_ms: dict[str, float] = {}
        self.names: tuple[str, ...] | None = None

    @property
    def cut(self) -> bool:
        return self.head is not None

    @classmethod
    def from_onnx(cls, path: str | Path, conf: float = 0.25, iou: float = 0.7,
                  max_det: int = 300, classes: Sequence[int] | None = None,
                  agnostic: bool = False, runtime: str = "auto", max_nms: int = 30000,
                  threads: int | None = None, provider: str = "cpu") -> "YoloV8":
        """Load an ultralytics YOLOv8 detect export (ModelError if it is not one); ``threads``
        and ``provider`` place the trunk's session (``OnnxRunner``)."""
        check_options(conf, iou, max_det, max_nms)
        model = load_model(Path(path))
        where = str(path)
        info = inspect_interface(model, where)
        options = dict(conf=conf, iou=iou, max_det=max_det, max_nms=max_nms, classes=classes,
                       agnostic=agnostic)
        try:
            layout = find_head(model, info)
        except HeadNotCuttable as why:
            reason = f"head not cut ({why}); using the full output and numpy postprocess"
            log.warning("%s: %s", where, reason)
            runner = OnnxRunner(model, [info.output_name], runtime, where, threads, provider)
            detector = cls(runner, info.input_hw, info.nc, None, options, reason)
        else:
            outputs = [t for i in range(len(layout.grids)) for t in (f"box{i}", f"cls{i}")]
            runner = OnnxRunner(cut_model(model, layout), outputs, runtime, where, threads,
                                provider)
            head = NativeHead(layout.grids, layout.strides, info.nc, **options)
            detector = cls(runner, info.input_hw, info.nc, head, options, None, layout)
        detector.names = class_names(model)
        return detector

    def kernels(self) -> list:
        return self.head.kernels() if self.head is not None else []

    def open(self) -> None:
        """Compile or load the native kernels now (else on the first `detect`)."""
        if self.head is not None:
            self.head.open()

    def ort_inputs(self, image_bgr: np.ndarray) -> dict[str, np.ndarray]:
        """What the runtime is fed for one image: ``{input name: float32 [1, 3, H, W]}`` (the
        letterboxed RGB image / 255). INT8 calibration (``quantize``) uses it."""
        _check_image(image_bgr)
        return {self.runner.input_name: reference.letterbox(image_bgr, self.input_hw)}

    def detect(self, image_bgr: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] BGR -> float32 [N, 6] (x1, y1, x2, y2, score, cls) in the image's
        pixels, by descending score."""
        _check_image(image_bgr)
        t0 = time.perf_counter()
        blob = reference.letterbox(image_bgr, self.input_hw)
        t1 = time.perf_counter()
        outputs = self.runner.run(blob)
        t2 = time.perf_counter()
        rows = self.infer_head(outputs).copy()
        t3 = time.perf_counter()
        reference.scale_boxes(self.input_hw, rows, image_bgr.shape[:2])
        self.timings_ms = {"letterbox": (t1 - t0) * 1e3, "trunk": (t2 - t1) * 1e3,
                           "head": (t3 - t2) * 1e3}
        return rows

    def infer_head(self, outputs: list[np.ndarray]) -> np.ndarray:
        """Runner outputs -> [N, 6] rows in letterboxed pixels (a view when native)."""
        if self.head is None:
            return reference.postprocess(outputs[0], **self.options)
        return self.head.run(outputs[0::2], outputs[1::2])


def postprocess(output0: np.ndarray, conf: float = 0.25, iou: float = 0.7, max_det: int = 300,
                max_nms: int = 30000, classes: Sequence[int] | None = None,
                agnostic: bool = False) -> np.ndarray:
    """ultralytics ``non_max_suppression`` on a full float32 [1, 4 + nc, A] output; see
    `reference.postprocess`. Returns float32 [N, 6] in letterboxed pixels."""
    check_options(conf, iou, max_det, max_nms)
    return reference.postprocess(output0, conf, iou, max_det, max_nms, classes, agnostic)


def _check_image(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 \
            or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
        got = f"{image.dtype} {image.shape}" if isinstance(image, np.ndarray) else type(image)
        raise InputError(f"detect() needs a uint8 [H, W, 3] BGR image, got {got}")
