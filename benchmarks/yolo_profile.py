"""Where ONNX Runtime spends the camera network's time, fp32 against int8, node by node.

Run: ``python benchmarks/yolo_profile.py [MODEL.onnx [MODEL.int8.onnx]]`` (default: the demo
YOLOv8 and its shipped int8 file). Both run the trunk as ``yolo.detect`` runs it (the export cut
before the head: ``surgery.cut_model``) on the sample drive's letterboxed images, one intra-op
thread, ORT's profiler on; the table gives each node's kernel time per run (ms, mean over the
frames and passes) after ORT's graph optimisations (NCHWc Conv with SiLU fused as QuickGelu in
fp32; QLinearConv in int8), then the totals per op type. The last table adds up what the float
SiLU between the int8 convolutions costs (DequantizeLinear -> Sigmoid, Mul -> QuantizeLinear):
a part of the int8 time no faster int8 dot product removes. The two sessions run one after the
other, so compare shares of each total, not ms across columns (the machine is shared).
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import node_rows, ort_node_times, print_machine, print_table  # noqa: E402

from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.yolo import reference  # noqa: E402
from cuvil_perception.ops.yolo.surgery import (cut_model, find_head, inspect_interface,  # noqa
                                               load_model)

IMAGES = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive" / "image_02" / "data"
PASSES = 3
SILU_OPS = ("DequantizeLinear", "Sigmoid", "Mul", "QuantizeLinear")


def node_times(path: Path, images: list) -> dict:
    """{(op type, node name): ms per run} of the cut trunk of ``path``."""
    model = load_model(path)
    info = inspect_interface(model, str(path))
    trunk = cut_model(model, find_head(model, info))
    feeds = [{info.input_name: reference.letterbox(image, info.input_hw)} for image in images]
    return ort_node_times(trunk, feeds, PASSES)


def silu_rows(times: dict, label: str) -> list:
    """Per op type of the float SiLU's round trip: ms per run and share of the total."""
    whole = sum(times.values())
    rows = []
    for op in SILU_OPS:
        ms = sum(v for (kind, _), v in times.items() if kind == op)
        rows.append((f"{label}: {op}", ms, f"{100 * ms / whole:.0f} %"))
    spent = sum(r[1] for r in rows)
    return rows + [(f"{label}: float SiLU round trip", spent, f"{100 * spent / whole:.0f} %")]


def main() -> None:
    print_machine()
    fp32 = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        builtin_models_dir() / "yolov8_cuvil_demo.onnx"
    int8 = Path(sys.argv[2]) if len(sys.argv) > 2 else fp32.with_name(f"{fp32.stem}.int8.onnx")
    images = [cv2.imread(str(p)) for p in sorted(IMAGES.glob("*.png"))]
    fp32_times, int8_times = node_times(fp32, images), node_times(int8, images)
    print_table(f"ORT kernel time of the YOLOv8 trunk, one thread ({fp32.name} vs {int8.name}, "
                f"{len(images)} images x {PASSES})", ["node", "ms / run", "share"],
                node_rows(fp32_times, "fp32") + node_rows(int8_times, "int8"))
    print_table("int8: the float SiLU between int8 convolutions (DQ -> Sigmoid, Mul -> Q)",
                ["op", "ms / run", "share of int8 total"], silu_rows(int8_times, "int8"))


if __name__ == "__main__":
    main()
