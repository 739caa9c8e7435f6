"""Where ONNX Runtime spends the PointPillars network's time, fp32 against int8, node by node.

Run: ``python benchmarks/pillars_profile.py [MODEL.onnx [MODEL.int8.onnx]]`` (default: the demo
model and its shipped int8 file). Both run the sparse path's network (``SparsePlan.rest``: no first
layer, no box / direction heads) on the sample drive's scans, one intra-op thread, with ORT's
profiler on; the table gives each node's kernel time per run (ms, mean over the frames and
passes) after ORT's graph optimisations (fused QLinearConv, NCHWc Conv, layout reorders), then
the totals per op type. The two sessions run one after the other, so compare shares of each
total, not ms across columns (the machine is shared).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.pillars import PillarConfig, PointPillars  # noqa: E402

DRIVE = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive"
PASSES = 3


def node_times(path: Path, scans: list) -> dict:
    """{(op type, node name): ms per run} of the sparse path's network of ``path``."""
    import onnxruntime as ort

    model = PointPillars.from_onnx(path, PillarConfig(max_pillars=16000)).open()
    inputs = [model.bev(points).copy()[None] for points in scans]
    with tempfile.TemporaryDirectory(prefix="cuvil-profile-") as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        options.enable_profiling, options.profile_file_prefix = True, os.path.join(tmp, "p")
        session = ort.InferenceSession(model.plan.rest.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        for _ in range(PASSES):
            for x in inputs:
                session.run(None, {name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    total = defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            key = (event["args"].get("op_name", "?"), event["name"][:-len("_kernel_time")])
            total[key] += event["dur"] / 1e3
    return {key: ms / (PASSES * len(inputs)) for key, ms in total.items()}


def rows(times: dict, label: str, top: int = 12) -> list:
    """The ``top`` slowest nodes, then one row per op type, as table rows."""
    whole = sum(times.values())
    out = [(f"{label}: {op} {name}", ms, f"{100 * ms / whole:.0f} %")
           for (op, name), ms in sorted(times.items(), key=lambda kv: -kv[1])[:top]]
    per_op = defaultdict(float)
    for (op, _), ms in times.items():
        per_op[op] += ms
    out += [(f"{label}: all {op}", ms, f"{100 * ms / whole:.0f} %")
            for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1])]
    return out + [(f"{label}: TOTAL", whole, "100 %")]


def main() -> None:
    print_machine()
    fp32 = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
    int8 = Path(sys.argv[2]) if len(sys.argv) > 2 else fp32.with_name(f"{fp32.stem}.int8.onnx")
    drive = Drive(DRIVE)
    scans = [drive.read(k).points for k in range(len(drive))]
    table = rows(node_times(fp32, scans), "fp32") + rows(node_times(int8, scans), "int8")
    print_table(f"ORT kernel time of the sparse path's network, one thread ({fp32.name} vs "
                f"{int8.name}, {len(scans)} scans x {PASSES})", ["node", "ms / run", "share"],
                table)


if __name__ == "__main__":
    main()
