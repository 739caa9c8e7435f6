"""``python benchmarks/executor.py --only stages``: the demo's stage costs on this machine
against the fp32 dense baseline, side by side in one run (``executor.py``'s docstring says what
is measured and how)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _util import print_table

from cuvil_perception.graph import apply_cli_sources, load_pipeline
from cuvil_perception.rt import LatencyRecorder, RunOptions, run_pipeline

REPO = Path(__file__).resolve().parents[1]
DEMO_RT = {"sched": {"policy": "fifo", "priority": 10}}  # make demo's `run --rt-fifo 10`

BASELINE = {"yolo": {"model": "builtin:yolov8_cuvil_demo.onnx"},
            "pillars": {"model": "builtin:pointpillars_cuvil_demo.onnx", "sparse": False}}
STAGE_COLUMNS = ("stage", "demo cpu", "fp32 dense cpu", "baseline / demo (cpu)", "demo wall",
                 "fp32 dense wall")


def fusion_pipeline(drive: Path, out_dir: Path, baseline: bool, rt: dict | None = None):
    """``configs/fusion.yaml`` on ``drive`` (outputs in ``out_dir``), as shipped or with the
    fp32 dense baseline's detectors (``BASELINE``)."""
    pipeline = load_pipeline(REPO / "configs" / "fusion.yaml", validate=False)
    apply_cli_sources(pipeline, replay=drive, out=out_dir / "run.jsonl")
    for stage in pipeline.stages:
        if stage.op == "mcap":
            stage.params["path"] = str(out_dir / "run.mcap")
        if baseline:
            stage.params.update(BASELINE.get(stage.id, {}))
    pipeline.rt = dict(rt or {})
    return pipeline.validate()


def stage_rows(out_dir: Path, drive: Path, repeat: int) -> tuple[list, list]:
    """(per-stage rows, e2e rows) of the demo against the fp32 dense baseline; see the module
    docstring."""
    timings: dict[bool, LatencyRecorder] = {False: LatencyRecorder(), True: LatencyRecorder()}
    for i in range(repeat):
        for baseline in (False, True):
            pipeline = fusion_pipeline(drive, out_dir / f"s{i}{baseline:d}", baseline)
            result = run_pipeline(pipeline, RunOptions(workers=1, rate=0.0, write_record=False,
                                                       enforce_deadlines=False))
            timings[baseline].merge(result.recorder)
    costs = {b: _stage_costs(r) for b, r in timings.items()}
    rows = []
    for stage, (wall, cpu) in costs[False].items():
        base_wall, base_cpu = costs[True][stage]
        rows.append((stage, cpu, base_cpu, f"{base_cpu / cpu:.2f}x", wall, base_wall))
    e2e = []
    for baseline in (False, True):
        merged = LatencyRecorder()
        for i in range(repeat):
            pipeline = fusion_pipeline(drive, out_dir / f"r{i}{baseline:d}", baseline, DEMO_RT)
            merged.merge(run_pipeline(pipeline, RunOptions(
                workers=2, rate=1.0, write_record=False, enforce_deadlines=False)).recorder)
        values = [(e["end_ns"] - e["start_ns"]) / 1e6 for e in merged.e2e]
        p50, p99 = np.percentile(values, [50, 99])
        e2e.append(("fp32 dense baseline" if baseline else "demo (as shipped)", len(values),
                    p50, p99, sum(v > 100.0 for v in values)))
    return rows, e2e


def _stage_costs(recorder) -> dict[str, tuple[float, float]]:
    """{row: (p50 wall ms, p50 cpu ms)} per stage (background writes as their own row), frames
    >= 1 (frame 0 pays for first-call work the warm-up does not cover)."""
    from cuvil_perception.rt.stats import timing_key

    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for t in recorder.timings:
        if t["frame"] >= 1:
            walls.setdefault(timing_key(t), []).append((t["end_ns"] - t["start_ns"]) / 1e6)
            cpus.setdefault(timing_key(t), []).append(t["cpu_ns"] / 1e6)
    return {k: (float(np.median(walls[k])), float(np.median(cpus[k]))) for k in walls}


def stages_main(repeat: int) -> None:
    import tempfile

    from cuvil_perception.drives.synth import make_drive
    from cuvil_perception.machine_info import cpu

    with tempfile.TemporaryDirectory() as tmp:
        make_drive(Path(tmp) / "drive", 40, 9001)
        rows, e2e = stage_rows(Path(tmp), Path(tmp) / "drive", repeat)
    print_table(f"demo stage costs vs the fp32 dense baseline on {cpu().describe()}: "
                f"configs/fusion.yaml, 40-frame drive, {repeat} runs each alternating, rate 0, "
                "1 worker (ms per frame, p50 of frames >= 1; background: the mcap sink's writer "
                "thread)",
                STAGE_COLUMNS, rows)
    print_table("the same at rate 1 (10 Hz), 2 workers, --rt-fifo 10, deadlines not enforced "
                "(ms)", ("pipeline", "frames", "e2e p50", "e2e p99", "over 100 ms"), e2e)
