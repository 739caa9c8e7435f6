"""The synthetic drive generator (``make-drive``): seconds per frame, and where they go.

Run: ``python benchmarks/synth_drive.py [--frames N]``. Writes a 2-frame and an N-frame drive
(default 20) into a temporary folder, twice each, interleaved, and prints the per-frame cost of
each (their ratio should stay near 1: the work is linear in the frames) and the share of the
N-frame drive's time spent in each step (LiDAR scan, camera render, PNG encode, the rest). On a
shared machine read the ratios and shares, not the seconds. This replaces the old "20 frames in
under 30 s" assertion of tests/test_drives_synth.py (tests never assert absolute times).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.drives.synth import make_drive, writer  # noqa: E402

STEPS = ("scan", "render")  # writer's own names; the PNG encode goes through writer.cv2


class _StepTimer:
    """Wraps the generator's steps (while active) and adds up their seconds."""

    def __init__(self):
        self.seconds = {name: 0.0 for name in (*STEPS, "png")}
        self._saved = {}

    def _wrap(self, name: str, function):
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - began
        return timed

    def __enter__(self):
        for name in STEPS:
            self._saved[name] = getattr(writer, name)
            setattr(writer, name, self._wrap(name, self._saved[name]))
        self._saved["imencode"] = writer.cv2.imencode
        writer.cv2.imencode = self._wrap("png", self._saved["imencode"])
        return self

    def __exit__(self, *exc):
        writer.cv2.imencode = self._saved.pop("imencode")
        for name in STEPS:
            setattr(writer, name, self._saved.pop(name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20, help="frames of the long drive")
    frames = parser.parse_args().frames
    print_machine()
    per_frame = {2: [], frames: []}
    timer = _StepTimer()
    with tempfile.TemporaryDirectory() as root:
        for run in range(2):
            for count in per_frame:
                summary = make_drive(Path(root) / f"d{count}-{run}", count, seed=3)
                per_frame[count].append(summary.seconds / count)
        with timer:
            total = make_drive(Path(root) / "split", frames, seed=3).seconds
    short, long = (statistics.median(per_frame[c]) for c in per_frame)
    print_table("make_drive: seconds per frame (median of 2)",
                ["drive", "s/frame", "ratio to 2 frames"],
                [["2 frames", short, 1.0], [f"{frames} frames", long, long / short]])
    rest = total - sum(timer.seconds.values())
    rows = [[name, seconds / frames, 100 * seconds / total]
            for name, seconds in [*timer.seconds.items(), ("rest (labels, files)", rest)]]
    print_table(f"make_drive, {frames} frames: where the time goes", ["step", "s/frame", "%"],
                rows)


if __name__ == "__main__":
    main()
