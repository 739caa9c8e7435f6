"""YOLOv8 detection (ultralytics semantics) with a static-shape native head.

Graph op: one stage, ``yolo.detect`` (input ``image`` uint8 [H, W, 3] BGR, output ``detections``
float32 [N, 6] = x1, y1, x2, y2, score, class in image pixels) — not split into
letterbox/trunk/head stages; see `op.py` for why.

Python API::

    YoloV8.from_onnx(path, conf=0.25, iou=0.7, max_det=300, classes=None, agnostic=False,
                     runtime="auto", max_nms=30000, threads=None)
                                                # .detect(image_bgr) -> float32 [N, 6]
    postprocess(output0, conf=0.25, iou=0.7, max_det=300, max_nms=30000, classes=None,
                agnostic=False)                 # a full [1, 4+nc, A] output
    letterbox(image_bgr, size), scale_boxes(net_hw, boxes, image_hw)

``runtime="auto"`` uses ONNX Runtime when it is installed and OpenCV DNN otherwise.

Deviation from DESIGN.md ("scale_boxes inverts it: subtract pad, divide by gain"):
`scale_boxes` divides x by ``new_w / W`` and y by ``new_h / H``, a separate gain per axis, as
ultralytics 8.4 does (checked against its ``predict`` output). The resized size is rounded, so a
single gain ``r`` was off by up to 0.46 px.

Modules: `reference` (numpy definitions, ultralytics rule by rule), `surgery` (find and cut the
Detect head of an export), `trunk` (OpenCV DNN / ONNX Runtime), `kernel_scan`, `kernel_decode`,
`kernel_nms` (IR generators), `native` (the head chaining them), `model` (`YoloV8`), `op`.
"""

from . import op  # noqa: F401  (registers yolo.detect)
from .model import YoloV8, postprocess
from .native import NativeHead
from .reference import letterbox, scale_boxes
from .surgery import HeadLayout, HeadNotCuttable, cut_model, find_head, inspect_interface

__all__ = [
    "HeadLayout",
    "HeadNotCuttable",
    "NativeHead",
    "YoloV8",
    "cut_model",
    "find_head",
    "inspect_interface",
    "letterbox",
    "postprocess",
    "scale_boxes",
]
