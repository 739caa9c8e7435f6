"""Benchmark the YOLOv8 head (native vs numpy reference) and the split of a whole detect().

Run: ``python benchmarks/yolo.py``.

1. Head decode + NMS at 640x640, 80 classes, with 0/50/200/1000 anchors above conf 0.25 (random
   per-level logits from ``testing.yolo_onnx.random_head_outputs``): the native head
   (scan + decode + NMS, one thread) against ``reference.head`` (numpy: decode every anchor, then
   ultralytics' non_max_suppression). The scan kernel alone is shown against the bytes it must
   read (80 x 8400 float32 = 2.7 MB; ~0.11 ms at 25 GB/s).
2. ``YoloV8.detect`` on the real ultralytics export (shared/data/yolov8, if present, else the
   bundled random model) split into letterbox / trunk (OpenCV DNN and ONNX Runtime) / head.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import measure, print_table  # noqa: E402

from cuvil_perception.ops.yolo import NativeHead, YoloV8, reference  # noqa: E402
from cuvil_perception.testing.yolo_onnx import random_head_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "yolov8"
GRIDS, STRIDES, NC = [(80, 80), (40, 40), (20, 20)], [8.0, 16.0, 32.0], 80
MEMORY_GBPS = 25.0


def head_rows() -> list:
    head = NativeHead(GRIDS, STRIDES, NC)
    head.open()
    scan = head._kernels[0]
    rows = []
    for n in (0, 50, 200, 1000):
        box, cls = random_head_outputs(GRIDS, NC, n, seed=n)
        head.run(box, cls)
        native = measure(lambda: head.run(box, cls), runs=7, number=50)
        numpy_ref = measure(lambda: reference.head(box, cls, STRIDES), runs=3, number=2)
        head._bind(box, cls)
        args = (head._cls_table.ctypes.data, head._best.ctypes.data, head._cand.ctypes.data,
                head._threshold)
        scan_t = measure(lambda: scan(*args), runs=7, number=50)
        kept = len(head.run(box, cls))
        rows.append([n, kept, native.median_ms, numpy_ref.median_ms,
                     f"{numpy_ref.median_ms / native.median_ms:.0f}x", scan_t.median_ms])
    return rows


def detect_rows() -> list:
    model = SHARED / "yolov8n_random.onnx"
    if not model.is_file():
        model = ROOT / "cuvil_perception" / "models" / "yolov8_tiny_random_640.onnx"
    image_path = SHARED / "bus.jpg"
    image = cv2.imread(str(image_path)) if image_path.is_file() else \
        cv2.imread(str(ROOT / "datasets/sample_drive/image_02/data/0000000000.png"))
    rows = []
    for runtime in ("opencv", "onnxruntime"):
        try:
            det = YoloV8.from_onnx(model, runtime=runtime)
        except Exception as exc:  # onnxruntime missing: skip that row, say why
            rows.append([runtime, str(exc)[:40], "", "", "", "", ""])
            continue
        det.open()
        samples = []
        for _ in range(6):
            out = det.detect(image)
            samples.append(det.timings_ms)
        med = {k: float(np.median([s[k] for s in samples[1:]])) for k in samples[0]}
        rows.append([runtime, model.name, len(out), med["letterbox"], med["trunk"], med["head"],
                     sum(med.values())])
    return rows


def main() -> None:
    print_table("YOLOv8 head: decode + NMS, 640x640, 80 classes (ms per call, median)",
                ["candidates", "kept", "native", "numpy ref", "speed-up", "scan kernel"],
                head_rows())
    scan_mb = NC * sum(h * w for h, w in GRIDS) * 4 / 1e6
    print(f"scan reads {scan_mb:.2f} MB -> {scan_mb / MEMORY_GBPS:.3f} ms at {MEMORY_GBPS:g} GB/s")
    print_table("YoloV8.detect split (ms, median of 5 after warm-up)",
                ["runtime", "model", "dets", "letterbox", "trunk", "head", "total"],
                detect_rows())


if __name__ == "__main__":
    main()
