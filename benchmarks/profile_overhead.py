"""What recording costs, measured the way ``profile`` records: the pipeline's e2e p50, run
time and CPU time with and without the sampler attached, and the sampler's own CPU time.

Run: ``python benchmarks/profile_overhead.py [--pairs 12] [--repeat R] [--hz HZ] [--rate 0]
[--pipeline configs/lidar_pillars.yaml] [--profiler py-spy]`` (``--repeat`` and ``--hz``
default to ``profile``'s own defaults). One worker process (the one ``profile`` runs,
`cuvil_perception.profile.worker`) is warmed up, then records in pairs of sessions of
``--repeat`` runs of the sample drive: one session unsampled, one with the sampler attached
once for all its runs and detached after them (`session.attach` / `session.detach`, what
``profile`` does), the order alternating pair by pair so both halves see the same machine
load. The figures are therefore those of a user's recording, attach and symbol loading
included, amortised over a recording's runs as ``profile`` amortises them.

Printed, each the median over pairs (with the pairs' spread for the first):

- e2e p50 overhead: the sampled session's e2e p50 / the unsampled one's - 1, a session's e2e
  p50 being the median of its runs' (the target: <= 10 % at the default rate). At ``--rate 0``
  (how ``profile`` runs) the frames are admitted together, so e2e includes their queueing and
  follows the run's length.
- run wall overhead: the same for a run's wall time (frames/s).
- worker CPU overhead: the worker's CPU time (all threads) over a session, sampled /
  unsampled - 1: what being stopped and unwound costs the pipeline's own threads.
- sampler CPU: the sampler's CPU seconds (attach to detach) over the session's wall time, and
  per sample (CPU / (rate x wall)). py-spy ``--native`` holds the whole process stopped while
  it unwinds, so its CPU per sample is about the time the pipeline stands still per sample;
  on a machine without a spare core it is also CPU taken from the pipeline.
- samples per recording: the samples a session's graph keeps (busy threads, the runs'
  set-up left out), what ``profile`` would draw from one recording of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine  # noqa: E402

from cuvil_perception.profile import DEFAULT_HZ, DEFAULT_REPEAT  # noqa: E402
from cuvil_perception.profile.perfmap import map_path  # noqa: E402
from cuvil_perception.profile.session import (attach, detach, read_samples,  # noqa: E402
                                              reply, send, start_worker)

ROOT = Path(__file__).resolve().parent.parent


def session(worker, sampler: str | None, hz: int, repeat: int, scratch: Path, n: int) -> dict:
    """``repeat`` runs, the sampler (if any) attached once around them: e2e p50 (median of
    the runs'), wall s per run, worker CPU s, sampler CPU s, session wall s, samples kept."""
    out = scratch / f"s{n}"
    proc = attach(sampler, worker.pid, hz, out, scratch / f"s{n}.err") if sampler else None
    start = time.monotonic()
    runs = []
    for _ in range(repeat):
        send(worker, "run")
        runs.append(reply(worker))
    wall = time.monotonic() - start
    cpu = detach(proc) if proc is not None else 0.0
    samples = read_samples(sampler, out, worker.pid, {}, hz).total if proc else 0
    out.unlink(missing_ok=True)
    return {"e2e": statistics.median(r["e2e_p50_ms"] for r in runs),
            "run_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": sum(r["cpu_s"] for r in runs), "sampler_cpu_s": cpu, "wall_s": wall,
            "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs a session")
    parser.add_argument("--hz", type=int, default=DEFAULT_HZ)
    parser.add_argument("--rate", type=float, default=0.0, help="replay pacing (0: as profile)")
    parser.add_argument("--pipeline", default=str(ROOT / "configs" / "lidar_pillars.yaml"))
    parser.add_argument("--profiler", default="py-spy", choices=("py-spy", "perf"))
    args = parser.parse_args()
    print_machine()
    spec = {"pipeline": args.pipeline, "replay": None, "sets": [], "frames": None,
            "workers": None, "rate": args.rate}
    pairs = []
    with tempfile.TemporaryDirectory() as scratch:
        worker = start_worker(spec, args.profiler, Path(scratch) / "worker.err")
        reply(worker)  # warmed up
        for pair in range(args.pairs):
            order = (None, args.profiler) if pair % 2 == 0 else (args.profiler, None)
            pairs.append({s: session(worker, s, args.hz, args.repeat, Path(scratch),
                                     2 * pair + i) for i, s in enumerate(order)})
        send(worker, "quit")
        worker.wait(timeout=30)
        map_path(worker.pid).unlink(missing_ok=True)
    report(args, pairs)


def report(args, pairs: list[dict]) -> None:
    def over(key):
        return [p[args.profiler][key] / p[None][key] - 1.0 for p in pairs]

    def med(values):
        return statistics.median(values)

    on = [p[args.profiler] for p in pairs]
    e2e = over("e2e")
    print(f"{Path(args.pipeline).name}, sample drive, rate {args.rate:g}; {args.profiler} at "
          f"{args.hz} Hz attached once per session of {args.repeat} runs; {len(pairs)} pairs; "
          "load average now %.1f %.1f %.1f" % os.getloadavg())
    print(f"e2e p50 overhead {100 * med(e2e):+.1f} % (pairs: "
          + ", ".join(f"{100 * r:+.0f}" for r in e2e) + f"); unsampled e2e p50 "
          f"{med(p[None]['e2e'] for p in pairs):.1f} ms")
    print(f"run wall overhead {100 * med(over('run_s')):+.1f} %; worker CPU overhead "
          f"{100 * med(over('cpu_s')):+.1f} %")
    share = med(s["sampler_cpu_s"] / s["wall_s"] for s in on)
    print(f"sampler CPU / session wall {100 * share:.1f} %; per sample "
          f"{1000 * share / args.hz:.2f} ms; samples per recording "
          f"{med(s['samples'] for s in on):.0f}")


if __name__ == "__main__":
    main()
