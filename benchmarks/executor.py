"""Benchmark the real-time executor: its own overhead per frame and per stage, end-to-end
latency of the demo pipeline on the bundled sample drive (1 vs 2 workers), and overload
shedding (the fusion pipeline replayed faster than it can run, admission control off vs on).

Run: ``python benchmarks/executor.py [--frames 2000] [--repeat 5] [--overload-frames 40]
[--only overhead|overload]``.

Definitions (printed with the tables):
* empty pipeline: ``test.scripted`` (8 floats a frame) -> K ``test.pass`` stages (``y = x``), no
  sink, ``rate 0``. Its frame time is all executor (plus a ~20 us seeded source read).
  Per-stage overhead = (frame time with 9 stages - with 1 stage) / 8.
* executor overhead on the demo = (empty-pipeline frame time with 1 stage + per-stage overhead x
  (demo stages - 1)) / the demo's sequential frame time. Target <= 5 %.
* e2e p99/p50 on the demo: pooled over ``repeat`` runs; at ``rate 1.0`` (real time, frames do not
  queue, so e2e is one frame's latency) and at ``rate 0`` (throughput: e2e includes the frames
  queued ahead). Target p99/p50 <= 1.25 at real time.
* overload: ``configs/fusion.yaml`` (two detectors + fusion, 2 workers, deadlines enforced) on a
  synthetic drive of ``--overload-frames`` frames (10 Hz, seed 9001) replayed at ``rate`` 1, 1.5
  and 2, with ``shed`` off (every frame admitted: today's executor before admission control) and
  on, side by side in one run. A frame is *on time* when it reached the sink (not dropped by a
  stage's ``on_miss``, not skipped at admission) within the pipeline's ``e2e_deadline_ms``
  counted from its arrival (its paced release time). e2e p50/p99 are over the frames that
  reached the sink.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_table  # noqa: E402

import cuvil_perception.testing.ops  # noqa: E402,F401  (registers test.*)
from cuvil_perception.graph import Pipeline, apply_cli_sources, load_pipeline  # noqa: E402
from cuvil_perception.rt import (LatencyRecorder, RunOptions, run_pipeline,  # noqa: E402
                                 run_sequential)

REPO = Path(__file__).resolve().parents[1]


def empty_pipeline(stages: int, frames: int) -> Pipeline:
    p = Pipeline(f"empty-{stages}")
    p.add("src", "test.scripted", frames=frames, n=8)
    previous = "src/value"
    for i in range(stages):
        p.add(f"pass{i}", "test.pass", inputs={"x": previous})
        previous = f"pass{i}/y"
    return p.validate()


def frame_us(run, frames: int, repeat: int) -> float:
    """Best-of-``repeat`` wall time per frame (us)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, (time.perf_counter() - t0) / frames * 1e6)
    return best


def overhead_rows(frames: int, repeat: int) -> tuple[list, dict]:
    rows, per = [], {}
    for name, runner in (("sequential", lambda p: run_sequential(p)),
                         ("rt workers=1", lambda p: run_pipeline(p, _fast(1))),
                         ("rt workers=2", lambda p: run_pipeline(p, _fast(2)))):
        one = frame_us(lambda: runner(empty_pipeline(1, frames)), frames, repeat)
        nine = frame_us(lambda: runner(empty_pipeline(9, frames)), frames, repeat)
        per[name] = (one, (nine - one) / 8)
        rows.append((name, one, nine, (nine - one) / 8))
    return rows, per


def _fast(workers: int, **kw) -> RunOptions:
    return RunOptions(workers=workers, enforce_deadlines=False, write_record=False, **kw)


def demo(out_dir: Path):
    pipeline = load_pipeline(REPO / "configs" / "demo.yaml", validate=False)
    apply_cli_sources(pipeline, replay=REPO / "datasets" / "sample_drive",
                      out=out_dir / "run.jsonl")
    for stage in pipeline.stages:
        if stage.op == "png":
            stage.params["dir"] = str(out_dir / "png")
    return pipeline.validate()


def demo_rows(out_dir: Path, repeat: int, per: dict) -> list:
    pipeline = demo(out_dir)
    stages = len(pipeline.stages)
    seq = [run_sequential(pipeline) for _ in range(repeat)]
    seq_ms = min(r.wall_s / r.frames for r in seq) * 1e3
    merged = LatencyRecorder()
    for result in seq:
        merged.merge(result.recorder)
    rows = [("sequential", "0", seq_ms, *_e2e(merged), "")]
    for workers in (1, 2):
        for rate in (0.0, 1.0):
            merged, walls = LatencyRecorder(), []
            for _ in range(repeat):
                result = run_pipeline(pipeline, _fast(workers, rate=rate))
                merged.merge(result.recorder)
                walls.append(result.wall_s / result.frames * 1e3)
            base, per_stage = per[f"rt workers={workers}"]
            overhead = (base + per_stage * (stages - 1)) / 1e3 / seq_ms
            rows.append((f"rt workers={workers}", f"{rate:g}", min(walls), *_e2e(merged),
                         f"{overhead:.2%}"))
    return rows


def overload_rows(out_dir: Path, frames: int, rates=(1.0, 1.5, 2.0)) -> tuple[list, float]:
    from cuvil_perception.drives.synth import make_drive

    drive = out_dir / "overload_drive"
    make_drive(drive, frames, 9001)
    rows, deadline = [], None
    for rate in rates:
        for shed in (False, True):
            pipeline = load_pipeline(REPO / "configs" / "fusion.yaml", validate=False)
            apply_cli_sources(pipeline, replay=drive, out=out_dir / f"overload-{rate}-{shed}.jsonl")
            pipeline.validate()
            deadline = pipeline.e2e_deadline_ms or 100.0
            result = run_pipeline(pipeline, RunOptions(workers=2, rate=rate, shed=shed,
                                                       write_record=False))
            rows.append(_overload_row(result, rate, shed, frames, deadline))
    return rows, deadline


def _overload_row(result, rate: float, shed: bool, frames: int, deadline: float) -> tuple:
    dropped = {d["frame"] for d in result.decisions if d["kind"] == "deadline_miss"
               and d["action"] in ("drop", "fail")}
    skipped = {d["frame"] for d in result.decisions if d["kind"] == "admission_skip"}
    e2e = {e["frame"]: (e["end_ns"] - e["start_ns"]) / 1e6 for e in result.recorder.e2e}
    delivered = [ms for frame, ms in e2e.items() if frame not in dropped | skipped]
    on_time = sum(1 for ms in delivered if ms <= deadline)
    p50, p99 = np.percentile(delivered, [50, 99]) if delivered else (float("nan"),) * 2
    return (f"{rate:g}x", "on" if shed else "off", frames, len(skipped), len(dropped),
            len(delivered), on_time, f"{on_time / frames:.0%}", p50, p99)


def _e2e(recorder) -> tuple:
    """p50, p99, p99/p50 over all frames, and p99/p50 without each run's frame 0 (warm-up)."""
    values = np.array([(e["end_ns"] - e["start_ns"]) / 1e6 for e in recorder.e2e])
    steady = np.array([(e["end_ns"] - e["start_ns"]) / 1e6 for e in recorder.e2e
                       if e["frame"] > 0])
    p50, p99 = np.percentile(values, [50, 99])
    s50, s99 = np.percentile(steady, [50, 99])
    return p50, p99, p99 / p50, s99 / s50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--overload-frames", type=int, default=40)
    parser.add_argument("--only", choices=("overhead", "overload"))
    args = parser.parse_args()
    import tempfile

    if args.only != "overload":
        rows, per = overhead_rows(args.frames, 3)
        print_table(f"executor overhead, empty pipeline ({args.frames} frames, rate 0, us/frame)",
                    ("executor", "1 stage", "9 stages", "per stage"), rows)
        with tempfile.TemporaryDirectory() as tmp:
            print_table(f"demo pipeline on the sample drive ({args.repeat} runs pooled, ms)",
                        ("executor", "rate", "frame time", "e2e p50", "e2e p99", "p99/p50",
                         "p99/p50 frames>=1", "executor overhead"),
                        demo_rows(Path(tmp), args.repeat, per))
    if args.only != "overhead":
        with tempfile.TemporaryDirectory() as tmp:
            rows, deadline = overload_rows(Path(tmp), args.overload_frames)
            print_table(f"overload: configs/fusion.yaml, 2 workers, e2e deadline {deadline:g} ms "
                        "(shed off = every frame admitted; ms)",
                        ("rate", "shed", "frames", "skipped", "dropped late", "delivered",
                         "on time", "on time %", "e2e p50", "e2e p99"), rows)


if __name__ == "__main__":
    main()
