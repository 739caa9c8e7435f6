"""Memory soak: run a pipeline over a looping drive for many frames and print how RSS moves.

    python benchmarks/soak.py [--frames 2000] [--pipeline configs/demo.yaml]
                              [--drive datasets/sample_drive] [--workers 2]

The drive loops (``replay`` param ``loop``), the sinks write into a temporary folder, deadlines
are measured (``rate 0``). RSS (``/proc/self/statm``) is sampled every ``--every`` frames after a
warm-up of ``--warmup`` frames; the script prints the samples, RSS at the start and the end of
the measured part, and the least-squares slope in bytes per frame. The target is a flat line:
end - start within +-1 MB over 2,000 frames. Absolute MB depend on the machine (libraries,
allocator); compare runs on one machine.

Single RSS samples swing by several MB as frames in flight allocate and free their large
buffers (glibc's per-thread arenas and its moving mmap threshold), so growth is judged on the
least-squares line through all samples (slope x measured frames) and on the median of the
first and last quarter of the samples, not on two single samples. The script also re-runs itself
with ``MALLOC_MMAP_THRESHOLD_=131072`` (large buffers always mmapped and returned on free, which
takes the allocator's swings out of the picture; ``--raw-malloc`` keeps glibc's default), and
stops sampling one interval before the end (the last frames drain the pipeline).

Measured on the dev VM (configs/demo.yaml, 2,000 frames, 2 workers): with every timing held as a
dict in memory, +3.1 MB between the first and last quarter (slope +2.4 KB/frame); with timings
spooled to a temporary file (``rt.spool``), -0.0 to +0.4 MB (slope -0.2 to +0.5 KB/frame).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine  # noqa: E402

from cuvil_perception.graph import Sink, apply_cli_sources, load_pipeline  # noqa: E402
from cuvil_perception.rt import RunOptions, run_pipeline  # noqa: E402


def rss_bytes() -> int:
    """Resident set size of this process (bytes)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def soak_pipeline(path: Path, drive: Path, scratch: Path):
    """The pipeline with a looping drive and every sink path moved into ``scratch``."""
    pipeline = load_pipeline(path, validate=False)
    apply_cli_sources(pipeline, replay=drive)
    pipeline.validate()
    for stage in pipeline.stages:
        if stage.op == "replay":
            stage.params["loop"] = True
        if stage.op_cls is not None and issubclass(stage.op_cls, Sink):
            for name, value in stage.resolved_params.items():
                if isinstance(value, Path):
                    stage.params[name] = str(scratch / stage.id / (value.name or name))
    return pipeline.validate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--pipeline", default=str(REPO / "configs" / "demo.yaml"))
    parser.add_argument("--drive", default=str(REPO / "datasets" / "sample_drive"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--raw-malloc", action="store_true",
                        help="keep glibc's dynamic mmap threshold (noisier RSS)")
    args = parser.parse_args()
    if not args.raw_malloc and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    print_machine()
    samples: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        if args.warmup <= done <= args.frames - args.every and \
                (done - args.warmup) % args.every == 0:
            samples.append((done, rss_bytes()))

    with tempfile.TemporaryDirectory(prefix="cuvil-soak-") as scratch:
        pipeline = soak_pipeline(Path(args.pipeline), Path(args.drive), Path(scratch))
        result = run_pipeline(pipeline, RunOptions(frames=args.frames, workers=args.workers,
                                                   record=Path(scratch) / "record.json",
                                                   progress=progress))
    print(f"{pipeline.name}: {result.frames} frames in {result.wall_s:.1f} s "
          f"(absolute times are noisy on a shared machine)")
    print(f"{'frame':>7} {'RSS MB':>9}")
    for frame, value in samples[::max(1, len(samples) // 20)]:
        print(f"{frame:>7} {value / 2**20:>9.2f}")
    frames = np.array([f for f, _ in samples], dtype=np.float64)
    rss = np.array([r for _, r in samples], dtype=np.float64) / 2**20
    slope = float(np.polyfit(frames, rss, 1)[0]) if len(samples) > 1 else 0.0
    grown = slope * (frames[-1] - frames[0]) if len(samples) > 1 else 0.0
    quarter = max(1, len(rss) // 4)
    first, last = float(np.median(rss[:quarter])), float(np.median(rss[-quarter:]))
    print(f"RSS start {rss[0]:.2f} MB, end {rss[-1]:.2f} MB (single samples); median of the "
          f"first / last quarter {first:.2f} / {last:.2f} MB ({last - first:+.2f} MB)")
    verdict = "flat" if abs(last - first) <= 1.0 else "GROWS"
    print(f"slope {slope * 2**20:+.0f} B/frame = {grown:+.2f} MB over "
          f"{int(frames[-1] - frames[0])} frames; verdict on the quarter medians: {verdict} "
          "(target +-1 MB)")


if __name__ == "__main__":
    main()
