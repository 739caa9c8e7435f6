"""Benchmark the YOLOv8 head (native vs numpy reference) and the split of a whole detect().

Run: ``python benchmarks/yolo.py``.

1. Head decode + NMS at 640x640, 80 classes, with 0/50/200/1000 anchors above conf 0.25 (random
   per-level logits from ``testing.yolo_onnx.random_head_outputs``): the native head
   (scan + decode + NMS, one thread) against ``reference.head`` (numpy: decode every anchor, then
   ultralytics' non_max_suppression). The scan kernel alone is shown against the bytes it must
   read (80 x 8400 float32 = 2.7 MB; ~0.11 ms at 25 GB/s).
2. ``YoloV8.detect`` on the real ultralytics export (shared/data/yolov8, if present, else the
   bundled random model) split into letterbox / trunk (OpenCV DNN and ONNX Runtime) / head.
3. The box branch's last 1x1 conv (cv2.*.2: 64 -> 4*16 per level) on candidate anchors only
   (issue 11 item 3): ONNX Runtime (one thread) running the cut trunk as it is against the same
   trunk ending one layer earlier (the conv inputs as outputs), interleaved, wall and CPU time;
   plus the candidates-only conv (gather + matvec at the anchors whose best class logit passes
   the scan gate; numpy here, an upper bound for a native kernel) and the MACs involved.
   Kept in the product only if trunk saving > candidate cost (see the verdict line).
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import interleaved, measure, network_macs, print_machine, print_table  # noqa: E402

from cuvil_perception.ops.onnx_runner import OnnxRunner  # noqa: E402
from cuvil_perception.ops.yolo import NativeHead, YoloV8, reference  # noqa: E402
from cuvil_perception.ops.logit_gate import logit_gate  # noqa: E402
from cuvil_perception.ops.yolo.surgery import cut_model, load_model  # noqa: E402
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


def _without_box_convs(trunk):
    """The cut trunk ending before each level's box 1x1 conv: outputs feat{i} (its input) in
    place of box{i}; returns (model, [(weight [64, C], bias [64]) per level])."""
    from onnx import helper, numpy_helper
    model = type(trunk)()
    model.CopyFrom(trunk)
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:  # exporters share equal weights through Identity nodes
        if node.op_type == "Identity" and node.input[0] in inits:
            inits[node.output[0]] = inits[node.input[0]]
    convs = []
    for i, out in enumerate([o for o in graph.output if o.name.startswith("box")]):
        conv = next(n for n in graph.node if out.name in n.output)
        weight = inits[conv.input[1]]
        assert conv.op_type == "Conv" and weight.shape[2:] == (1, 1), "box conv is not 1x1"
        convs.append((weight[:, :, 0, 0], inits[conv.input[2]]))
        graph.node.remove(conv)
        dims = [d.dim_value for d in out.type.tensor_type.shape.dim]
        at = list(graph.output).index(out)
        graph.output.remove(out)
        graph.output.insert(at, helper.make_tensor_value_info(
            conv.input[0], out.type.tensor_type.elem_type, [1, weight.shape[1], *dims[2:]]))
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model, convs


def _candidate_box(feats, cls_maps, convs, gate):
    """The box logits [64, n] of each level at the anchors whose best class logit >= gate."""
    out = []
    for feat, cls_map, (weight, bias) in zip(feats, cls_maps, convs):
        flat = feat.reshape(feat.shape[1], -1)
        cand = np.flatnonzero(cls_map.reshape(cls_map.shape[1], -1).max(axis=0) >= gate)
        out.append((cand, weight @ flat[:, cand] + bias[:, None]))
    return out


def box_conv_rows() -> tuple[list, str]:
    path = SHARED / "yolov8n_random.onnx"
    demo = ROOT / "cuvil_perception" / "models" / "yolov8_cuvil_demo.onnx"
    image = cv2.imread(str(ROOT / "datasets/sample_drive/image_02/data/0000000000.png"))
    rows, wins = [], []
    for model_path in [p for p in (path, demo) if p.is_file()]:
        det = YoloV8.from_onnx(model_path, runtime="onnxruntime", threads=1)
        trunk = cut_model(load_model(model_path), det.layout)
        lean, convs = _without_box_convs(trunk)
        names = [o.name for o in trunk.graph.output]
        dense = OnnxRunner(trunk, names, "onnxruntime", str(model_path), threads=1)
        sparse = OnnxRunner(lean, [o.name for o in lean.graph.output], "onnxruntime",
                            str(model_path), threads=1)
        blob = reference.letterbox(image, det.input_hw)
        dense_out, lean_out = dense.run(blob), sparse.run(blob)
        feats, cls_maps = lean_out[0::2], lean_out[1::2]
        gate = logit_gate(0.25)
        picked = _candidate_box(feats, cls_maps, convs, gate)
        for (cand, values), box in zip(picked, dense_out[0::2]):  # same values as the dense conv
            np.testing.assert_allclose(values, box.reshape(box.shape[1], -1)[:, cand],
                                       rtol=1e-4, atol=1e-4)
        wall, cpu = interleaved({"dense": lambda _: dense.run(blob),
                                 "lean": lambda _: sparse.run(blob),
                                 "cand": lambda _: _candidate_box(feats, cls_maps, convs, gate)},
                                [0], 15)
        count = sum(len(c) for c, _ in picked)
        box_macs = sum(w.size * f.shape[2] * f.shape[3] for (w, _), f in zip(convs, feats))
        saving = cpu["dense"] - cpu["lean"] - cpu["cand"]
        wins.append(saving > 0.05 * cpu["dense"])
        rows.append([model_path.name, count, wall["dense"], wall["lean"], cpu["dense"],
                     cpu["lean"], cpu["cand"], saving,
                     f"{box_macs / 1e6:.0f} / {network_macs(trunk) / 1e6:.0f} M"])
    verdict = ("kept" if wins and all(wins) else
               "not kept: the trunk saves less than 5 % of its CPU time net of the candidates' "
               "cost, so the product keeps the dense box conv")
    return rows, verdict


def main() -> None:
    print_machine()
    print_table("YOLOv8 head: decode + NMS, 640x640, 80 classes (ms per call, median)",
                ["candidates", "kept", "native", "numpy ref", "speed-up", "scan kernel"],
                head_rows())
    scan_mb = NC * sum(h * w for h, w in GRIDS) * 4 / 1e6
    print(f"scan reads {scan_mb:.2f} MB -> {scan_mb / MEMORY_GBPS:.3f} ms at {MEMORY_GBPS:g} GB/s")
    print_table("YoloV8.detect split (ms, median of 5 after warm-up)",
                ["runtime", "model", "dets", "letterbox", "trunk", "head", "total"],
                detect_rows())
    rows, verdict = box_conv_rows()
    print_table("YOLOv8 box branch's last 1x1 conv: dense in the trunk vs at candidates only "
                "(ORT, one thread; ms, median; CPU = this thread's CPU time)",
                ["model", "candidates", "trunk ms", "trunk w/o box conv ms", "trunk CPU",
                 "w/o box conv CPU", "candidates conv CPU", "net CPU saving",
                 "box conv MACs / trunk"], rows)
    print(f"verdict: {verdict}")


if __name__ == "__main__":
    main()
