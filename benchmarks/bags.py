"""Benchmark ROS bags and the mcap sink, as ratios measured side by side in one run:

1. read throughput: every synchronised frame of the bundled sample drive (points + image +
   calibration, decoded) read from the KITTI folder and from bags converted from it (ROS 2
   MCAP with raw bgr8 images, with PNG images, ROS 2 sqlite3, ROS 1); frames/s and MB/s (bytes
   of the recording on disk / read time), open (the bag's scan pass) included, ratio to KITTI.
2. the mcap sink's cost per frame on real frames: results only (3D boxes, 2D detections, fused
   objects), + the JPEG camera image, + the LiDAR cloud; ratio to the jsonl sink writing the
   same inputs.
3. the live view beside compute: configs/lidar_pillars.yaml on the sample drive with and
   without ``--foxglove`` (the live ``mcap`` stage it adds, with the cloud and the boxes, also
   writing an MCAP file so every message is encoded even with no client connected; io side),
   runs alternated; the PointPillars stage's p50 and the e2e p50, ratio with / without.

Run: ``python benchmarks/bags.py [--repeat 5]``. Absolute times on a shared machine are noisy;
read the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.drives.bag import BagDrive, write_bag  # noqa: E402
from cuvil_perception.graph import FrameInfo, Pipeline, RunContext, load_pipeline  # noqa: E402
from cuvil_perception.rt import RunOptions, run_pipeline  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
BAGS = (("ROS 2 MCAP, bgr8", "a.mcap", "bgr8"), ("ROS 2 MCAP, png", "b.mcap", "png"),
        ("ROS 2 sqlite3, bgr8", "c.db3", "bgr8"), ("ROS 1, bgr8", "d.bag", "bgr8"))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() \
        else path.stat().st_size


def _read_all(open_drive) -> int:
    drive = open_drive()
    for k in range(len(drive)):
        frame = drive.read(k)
        assert frame.points.shape[0] > 0
    return len(drive)


def read_rows(folder: Path, repeat: int) -> list:
    sources = [("KITTI raw folder", DRIVE, lambda: Drive(DRIVE))]
    for title, name, encoding in BAGS:
        path = write_bag(DRIVE, folder / name, None, encoding).path
        sources.append((title, path, lambda path=path: BagDrive(path)))
    times: dict[str, list[float]] = {title: [] for title, _, _ in sources}
    for _ in range(repeat):  # alternate the sources so machine load hits them alike
        for title, _, open_drive in sources:
            t0 = time.perf_counter()
            frames = _read_all(open_drive)
            times[title].append(time.perf_counter() - t0)
    base = statistics.median(times["KITTI raw folder"])
    rows = []
    for title, path, _ in sources:
        seconds = statistics.median(times[title])
        rows.append((title, f"{_size(path) / 1e6:.1f}", f"{frames / seconds:.1f}",
                     f"{_size(path) / 1e6 / seconds:.1f}", f"{seconds / base:.2f}x"))
    return rows


def _frames(count: int) -> list[tuple[dict, FrameInfo]]:
    drive = Drive(DRIVE)
    rng = np.random.default_rng(0)
    out = []
    for k in range(count):
        frame = drive.read(k % len(drive))
        boxes = np.column_stack([rng.uniform(5, 40, (15, 3)), np.full((15, 3), 2.0),
                                 rng.uniform(-3, 3, 15)]).astype(np.float32)
        objects = np.zeros((10, 15), np.float32)
        objects[:, 1:8], objects[:, 8:12] = boxes[:10], (100, 100, 200, 180)
        inputs = {"boxes": boxes, "scores": rng.uniform(0, 1, 15).astype(np.float32),
                  "labels": rng.integers(0, 3, 15).astype(np.int32), "objects": objects,
                  "detections": np.column_stack([rng.uniform(0, 600, (12, 4)),
                                                 rng.uniform(0, 1, 12), rng.integers(0, 3, 12)]
                                                ).astype(np.float32),
                  "image": frame.image, "points": frame.points, "P2": drive.calib.P2,
                  "R0_rect": drive.calib.R0_rect, "Tr_velo_to_cam": drive.calib.Tr_velo_to_cam}
        out.append((inputs, FrameInfo(k, frame.scan_ns + k, {"points": frame.scan_ns + k,
                                                             "image": frame.image_ns + k})))
    return out


def _sink_ms(op_name: str, names: tuple[str, ...], frames, folder: Path, **params) -> float:
    """Median ms per frame of one sink's process() (open and close excluded)."""
    p = Pipeline("bench")
    drive = p.add("drive", "replay", path=str(DRIVE))
    p.add("sink", op_name, inputs={"P2": drive.out("P2")}, path=str(folder / f"o.{op_name}"),
          **params)
    stage = p.validate().stage("sink")
    from cuvil_perception.ops.mcap_sink import INPUTS

    op = stage.op_cls(dict(stage.resolved_params), {n: INPUTS[n] for n in names})
    op.open(RunContext())
    samples = []
    for inputs, info in frames:
        chosen = {n: inputs[n] for n in names}
        t0 = time.perf_counter()
        op.process(chosen, info)
        samples.append((time.perf_counter() - t0) * 1e3)
    op.close()
    return statistics.median(samples)


def sink_rows(folder: Path, count: int) -> list:
    frames = _frames(count)
    results = ("boxes", "scores", "labels", "detections", "objects")
    configs = (("results only", results),
               ("+ JPEG image", results + ("image", "P2", "R0_rect", "Tr_velo_to_cam")),
               ("+ image + cloud", results + ("image", "points", "P2", "R0_rect",
                                             "Tr_velo_to_cam")))
    rows = []
    for title, names in configs:
        jsonl = _sink_ms("jsonl", names, frames, folder, max_values=100_000)
        mcap = _sink_ms("mcap", names, frames, folder)
        rows.append((title, f"{jsonl:.2f}", f"{mcap:.2f}", f"{mcap / jsonl:.2f}x"))
    return rows


def _pillars_run(live: bool, folder: Path) -> tuple[float, float]:
    from cuvil_perception.cli.live_view import apply_foxglove

    pipeline = load_pipeline(REPO / "configs" / "lidar_pillars.yaml", validate=False)
    pipeline.stage("log").params["path"] = str(folder / "pillars.jsonl")
    pipeline.validate()
    if live:
        apply_foxglove(pipeline, "127.0.0.1:0")
        pipeline.stage("foxglove_live").params["path"] = str(folder / "live.mcap")
        pipeline.validate()
    result = run_pipeline(pipeline, RunOptions(workers=2, enforce_deadlines=False,
                                               write_record=False))
    rows = {row.stage: row for row in result.report.rows}
    return rows["detect"].p50, rows["e2e"].p50


def live_rows(folder: Path, repeat: int) -> list:
    runs = {False: [], True: []}
    for _ in range(repeat):
        for live in (False, True):
            runs[live].append(_pillars_run(live, folder))
    rows = []
    for index, name in ((0, "pillars.detect p50"), (1, "e2e p50")):
        off = statistics.median(r[index] for r in runs[False])
        on = statistics.median(r[index] for r in runs[True])
        rows.append((name, f"{off:.1f}", f"{on:.1f}", f"{on / off:.2f}x"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--frames", type=int, default=40, help="frames for the sink rows")
    args = parser.parse_args()
    print_machine()
    folder = Path(tempfile.mkdtemp(prefix="cuvil-bench-bags-"))
    try:
        print_table("read every frame of the sample drive (8 frames, open included)",
                    ("source", "MB on disk", "frames/s", "MB/s", "time vs KITTI"),
                    read_rows(folder, args.repeat))
        print_table(f"sink cost per frame (median of {args.frames} real frames, ms)",
                    ("inputs", "jsonl ms", "mcap ms", "mcap / jsonl"),
                    sink_rows(folder, args.frames))
        print_table("lidar_pillars.yaml with and without --foxglove (ms, workers 2)",
                    ("stage", "without", "with live view", "ratio"),
                    live_rows(folder, max(2, args.repeat // 2)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
