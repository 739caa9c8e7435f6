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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import node_rows, ort_node_times, print_machine, print_table  # noqa: E402

from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops.pillars import PillarConfig, PointPillars  # noqa: E402

DRIVE = Path(__file__).resolve().parents[1] / "datasets" / "sample_drive"
PASSES = 3


def node_times(path: Path, scans: list) -> dict:
    """{(op type, node name): ms per run} of the sparse path's network of ``path``."""
    model = PointPillars.from_onnx(path, PillarConfig(max_pillars=16000)).open()
    name = model.plan.rest.graph.input[0].name
    feeds = [{name: model.bev(points).copy()[None]} for points in scans]
    return ort_node_times(model.plan.rest, feeds, PASSES)


def main() -> None:
    print_machine()
    fp32 = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
    int8 = Path(sys.argv[2]) if len(sys.argv) > 2 else fp32.with_name(f"{fp32.stem}.int8.onnx")
    drive = Drive(DRIVE)
    scans = [drive.read(k).points for k in range(len(drive))]
    table = node_rows(node_times(fp32, scans), "fp32") + \
        node_rows(node_times(int8, scans), "int8")
    print_table(f"ORT kernel time of the sparse path's network, one thread ({fp32.name} vs "
                f"{int8.name}, {len(scans)} scans x {PASSES})", ["node", "ms / run", "share"],
                table)


if __name__ == "__main__":
    main()
