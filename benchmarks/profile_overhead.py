"""What recording costs: the pipeline's e2e p50, its CPU time, and the sampler's own CPU time,
with and without the sampler attached.

Run: ``python benchmarks/profile_overhead.py [--pairs 10] [--hz 100] [--rate 0]
[--pipeline configs/lidar_pillars.yaml] [--profiler py-spy]``. One worker process (the one
``profile`` runs, `cuvil_perception.profile.worker`) is warmed up, then runs the sample drive
in pairs: once unsampled, once with the sampler attached at ``--hz`` (started before the run,
stopped after it), the order alternating pair by pair so both halves see the same machine load.

Three figures, each the median over pairs:

- e2e p50 overhead: sampled e2e p50 / unsampled e2e p50 - 1 (the target: <= 10 % at the
  default rate). At ``--rate 0`` (how ``profile`` runs) e2e includes the queueing of frames
  admitted together; on a machine shared with other jobs single pairs swing by tens of percent
  either way, so read it with the pairs printed beside it.
- worker CPU overhead: the worker's CPU time over the run (all threads), sampled / unsampled
  - 1: what being stopped and unwound costs the pipeline's own threads (cache misses, signals).
- sampler share: the sampler's CPU time / the run's wall time. py-spy ``--native`` stops the
  whole process while it unwinds, so this bounds the share of the run the pipeline stood still
  (py-spy also spends CPU while the process runs: it is an upper bound) and, on a machine
  without a spare core, the CPU the sampler takes from the pipeline.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine  # noqa: E402

from cuvil_perception.profile import DEFAULT_HZ  # noqa: E402
from cuvil_perception.profile.session import (_reply, _send, _start_sampler,  # noqa: E402
                                              _start_worker)

ROOT = Path(__file__).resolve().parent.parent


def timed_run(worker, sampler: str | None, hz: int, scratch: Path, number: int) -> dict:
    """One run's reply (e2e p50 ms, cpu_s, wall_s) and, sampled, the sampler's CPU seconds."""
    proc = _start_sampler(sampler, worker.pid, hz, scratch / f"s{number}",
                          scratch / f"s{number}.err") if sampler else None
    _send(worker, "run")
    reply = _reply(worker)
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        reply["sampler_cpu_s"] = usage.ru_utime + usage.ru_stime
    return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--hz", type=int, default=DEFAULT_HZ)
    parser.add_argument("--rate", type=float, default=0.0, help="replay pacing (0: as profile)")
    parser.add_argument("--pipeline", default=str(ROOT / "configs" / "lidar_pillars.yaml"))
    parser.add_argument("--profiler", default="py-spy", choices=("py-spy", "perf"))
    args = parser.parse_args()
    print_machine()
    spec = {"pipeline": args.pipeline, "replay": None, "sets": [], "frames": None,
            "workers": None, "rate": args.rate}
    e2e, cpu, share = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        worker = _start_worker(spec, args.profiler, Path(scratch) / "worker.err")
        _reply(worker)  # warmed up
        for pair in range(args.pairs):
            order = (None, args.profiler) if pair % 2 == 0 else (args.profiler, None)
            runs = {s: timed_run(worker, s, args.hz, Path(scratch), 2 * pair + i)
                    for i, s in enumerate(order)}
            on, off = runs[args.profiler], runs[None]
            e2e.append(on["e2e_p50_ms"] / off["e2e_p50_ms"] - 1.0)
            cpu.append(on["cpu_s"] / off["cpu_s"] - 1.0)
            share.append(on["sampler_cpu_s"] / on["wall_s"])
        _send(worker, "quit")
        worker.wait(timeout=30)
    print(f"{Path(args.pipeline).name}, sample drive (8 frames a run), {args.pairs} pairs, "
          f"rate {args.rate:g}; {args.profiler} at {args.hz} Hz")
    print(f"e2e p50 overhead {100 * statistics.median(e2e):+.1f} % (pairs: "
          + ", ".join(f"{100 * r:+.0f}" for r in e2e) + ")")
    print(f"worker CPU overhead {100 * statistics.median(cpu):+.1f} %; sampler CPU / run wall "
          f"{100 * statistics.median(share):.1f} %")


if __name__ == "__main__":
    main()
