"""Graph op ``yolo.detect``: camera image in, YOLOv8 detections out (one stage).

One op rather than letterbox/trunk/head stages: the three steps share the letterbox geometry,
the head's input is six large per-level tensors that would otherwise cross stage boundaries every
frame, and the trunk dominates the stage's time anyway (``YoloV8.timings_ms`` splits it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...graph import FrameInfo, Op, Param, ParamProblem, PortSpec, Range, RunContext, register
from ..onnx_runner import PROVIDERS, RUNTIMES, provider_problem
from ..summary import count_by_class
from ..warmup import noise_image, warm_up
from .model import YoloV8
from .surgery import class_names, load_model


@register
class YoloDetect(Op):
    """ultralytics YOLOv8 detection with the head compiled natively for the model's grid."""

    name = "yolo.detect"
    tag = "compute"
    measures_warmup = True  # open() times warm-up passes of detect(): deadline_ms: auto
    doc = ("YOLOv8 detect (ultralytics ONNX export): letterbox, trunk in OpenCV DNN or ONNX "
           "Runtime, native DFL decode + class-aware NMS.")
    params = (
        Param("model", Path, doc="ultralytics YOLOv8 detect ONNX export (yolo export format=onnx)",
              must_exist=True),
        Param("conf", float, 0.25, doc="keep boxes whose best class score is > conf",
              range=Range(0.0, 1.0)),
        Param("iou", float, 0.7, doc="suppress boxes overlapping a better one with IoU > iou",
              range=Range(0.0, 1.0)),
        Param("max_det", int, 300, doc="at most this many detections per image",
              range=Range(1, 100_000)),
        Param("max_nms", int, 30000, doc="at most this many boxes (best scores) enter NMS",
              range=Range(1, 1_000_000)),
        Param("classes", list, None, optional=True, item_type=int,
              doc="only these class indices (null: all)", range=Range(0, 9999), min_items=1),
        Param("agnostic", bool, False, doc="class-agnostic NMS"),
        Param("runtime", str, "auto", choices=RUNTIMES, doc="where the trunk runs"),
        Param("execution_provider", str, "cpu", choices=tuple(PROVIDERS),
              doc="ONNX Runtime execution provider of the trunk (cpu, cuda, tensorrt, openvino: "
                  "the ones this machine's onnxruntime build has)"),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self._model: YoloV8 | None = None  # loaded at prewarm/open time, never here (no IO)
        self._names: tuple[str, ...] | None = None
        self._threads = 1  # intra-op threads; open() takes the run's placement (rt.placement)

    def input_ports(self):
        return (PortSpec("image", "uint8", (None, None, 3), "camera image, BGR, pixels"),)

    def output_ports(self):
        return (PortSpec("detections", "float32", (None, 6),
                         "x1, y1, x2, y2 (image pixels, x right, y down), score, class index; "
                         "by descending score"),)

    def check(self) -> None:
        problem = provider_problem(self.p["runtime"], self.p.get("execution_provider", "cpu"))
        if problem is not None:
            raise ParamProblem("execution_provider", problem)

    def _detector(self) -> YoloV8:
        if self._model is None:
            self._model = YoloV8.from_onnx(
                self.p["model"], conf=self.p["conf"], iou=self.p["iou"],
                max_det=self.p["max_det"], classes=self.p["classes"],
                agnostic=self.p["agnostic"], runtime=self.p["runtime"],
                max_nms=self.p["max_nms"], threads=self._threads,
                provider=self.p.get("execution_provider", "cpu"))
        return self._model

    def placement(self) -> str | None:
        """Where the trunk runs (``run`` prints it with the stage's thread group)."""
        return None if self._model is None else self._model.runner.describe()

    def kernels(self) -> list:
        return self._detector().kernels()

    def open(self, ctx: RunContext) -> None:
        threads = ctx.intra_op_threads
        if threads != self._threads:  # prewarm built the session with the default
            self._threads, self._model = threads, None
        model = self._detector()
        if model.fallback_reason is not None:
            ctx.warning(f"{self.p['model']}: {model.fallback_reason}")
        model.open()
        # Warm-up passes before frame 0 (ops.warmup says why several, on a noise image): the
        # runtime allocates on its first two calls, which would otherwise land on (and blow the
        # deadline of) the first frames.
        spec = self.connected.get("image")
        shape = spec.shape if spec is not None and spec.shape is not None else (None, None, 3)
        height, width = (shape[0], shape[1]) if None not in shape[:2] else model.input_hw
        self.warmup_ns = warm_up(model.detect, lambda: noise_image(height, width), ctx)

    summary_port = "detections"
    roles = {"detections_2d": "detections"}

    def summarize(self, port: str, detections: np.ndarray) -> str:
        """``N: k car, ...`` with the class names of the export's metadata (ids without them)."""
        if not len(detections):
            return "0"
        if self._names is None:
            self._names = class_names(load_model(self.p["model"])) or ()
        return f"{len(detections)}: {count_by_class(detections[:, 5], self._names)}"

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        return {"detections": self._detector().detect(inputs["image"])}

    def close(self) -> None:
        self._model = None
