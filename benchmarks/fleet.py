"""Benchmark fleet replay: drives per minute for 1 process vs the local pool vs a local Ray, the
per-drive overhead of the fleet layer against the drive's own run time, what shipping a drive's
bytes to a node costs, and the time to join a cluster.

Run: ``python benchmarks/fleet.py [--drives 6] [--frames 4] [--pipeline configs/fusion.yaml]``.

Definitions (printed with the tables):
* 1 process: ``fleet.execute`` (the drive's own eval run) called for each drive in turn in this
  process — no fleet layer at all; the baseline.
* local pool: ``fleet eval --local N`` (N = cores); local Ray: ``--ray local`` on a fresh Ray
  (its start-up time shown apart, not in the wall time; 1 CPU per drive).
* overhead per drive = (fleet wall time - the sum of the drives' own run times) / drives, with
  ONE drive at a time (local pool of 1 process; Ray with every CPU for one task), so it is what
  the fleet layer adds: process start-up, prewarm, scheduling, pickling and result transfer,
  writing the results row. The drive's own run time is ``seconds`` of its row (measured inside
  the worker around the single-drive function).
* shipped drive: one Ray task running a drive from its path vs from its bytes (``transport
  .pack`` on the driver, ``ray.put``, the task unpacks them into its temporary folder): the
  difference is what a node without the drive pays (best of 3 each, same warm worker).
* join: ``ray.init`` of a new local Ray (``--ray local``), and of a driver joining a running
  cluster (``ray start --head`` on 127.0.0.2, then ``--ray 127.0.0.2:PORT``): what the fleet
  pays before its prewarm.
The machine is shared: absolute seconds are noisy; the ratios are measured side by side in one
run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.drives.synth import make_drive  # noqa: E402
from cuvil_perception.fleet import (DriveTask, LocalPool, ResultsFile, discover,  # noqa: E402
                                    execute, job_hash, make_job, run_fleet)

REPO = Path(__file__).resolve().parents[1]


def one_process(job, drives) -> tuple[float, float]:
    """(wall s, sum of the drives' own run s) calling ``execute`` for each drive here."""
    started, own = time.perf_counter(), 0.0
    for index, drive in enumerate(drives):
        outcome = execute(job, DriveTask(index, str(drive.path), drive.name))
        assert outcome["status"] == "ok", outcome.get("error")
        own += outcome["seconds"]
    return time.perf_counter() - started, own


def fleet(job, pipeline, drives, backend, out: Path) -> tuple[float, float]:
    """(wall s, sum of the drives' own run s) of one fleet run through ``backend``."""
    results = ResultsFile(out / "results.jsonl", {"mode": job.mode}, resume=False)
    started = time.perf_counter()
    run = run_fleet(job, drives, backend, results, job_hash(job, pipeline), out)
    wall = time.perf_counter() - started
    results.close()
    assert all(row and row["status"] == "ok" for row in run.rows), run.rows
    return wall, sum(row["seconds"] for row in run.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drives", type=int, default=6)
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--pipeline", default=str(REPO / "configs" / "fusion.yaml"))
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure every configuration R times, keep the fastest")
    args = parser.parse_args()
    print_machine()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="cuvil-bench-fleet-") as tmp:
        root = Path(tmp)
        for i in range(args.drives):
            make_drive(root / "drives" / f"drive_{i:04d}", args.frames, 300 + i)
        drives = discover([str(root / "drives" / "drive_*")])
        job, pipeline, _ = make_job("eval", args.pipeline, drives, None, workers=1)
        execute(job, DriveTask(0, str(drives[0].path), drives[0].name))  # warm the disk cache
        rows, overhead = measure_all(job, pipeline, drives, root / "r0", cores)
        shipping = measure_shipping(job, drives[:2])
        joins = measure_joins(root)
        for r in range(1, args.repeat):  # best of R: the machine is shared
            more_rows, more_overhead = measure_all(job, pipeline, drives, root / f"r{r}", cores)
            rows = [min(a, b, key=lambda x: x[1]) for a, b in zip(rows, more_rows)]
            overhead = [min(a, b, key=lambda x: x[1]) for a, b in zip(overhead, more_overhead)]
    n = len(drives)
    base = rows[0][1]
    print_table(f"fleet eval of {Path(args.pipeline).name}: {n} drives x {args.frames} frames, "
                f"{cores} cores, best of {args.repeat} (shared machine: compare the ratios)",
                ["configuration", "wall s", "drives/min", "speed vs 1 process"],
                [[name, f"{wall:.2f}", f"{n * 60 / wall:.1f}", f"{base / wall:.2f}x"]
                 for name, wall in rows])
    print_table("fleet-layer overhead, one drive at a time",
                ["backend", "drive's own run s (mean)", "fleet wall s per drive",
                 "overhead s per drive", "overhead / own run"],
                [[name, f"{own / n:.3f}", f"{wall / n:.3f}", f"{(wall - own) / n:.3f}",
                  f"{(wall - own) / own:.1%}"] for name, wall, own in overhead])
    print_table("Ray: a drive run from its path vs shipped as bytes (one warm worker)",
                ["drive", "MB", "from path s", "shipped s", "shipping costs s"],
                [[name, f"{mb:.1f}", f"{path_s:.3f}", f"{ship_s:.3f}",
                  f"{ship_s - path_s:+.3f}"] for name, mb, path_s, ship_s in shipping])
    print_table("time to join Ray (before the prewarm)", ["how", "s"],
                [[name, f"{seconds:.2f}"] for name, seconds in joins])


def measure_all(job, pipeline, drives, root: Path, cores: int):
    """Throughput rows [(name, wall)] and overhead rows [(name, wall, own)]."""
    from cuvil_perception.fleet.ray_backend import RayBackend

    rows, overhead = [], []
    wall, own = one_process(job, drives)
    rows.append(("1 process (no fleet layer)", wall))
    overhead.append(("none (1 process)", wall, own))
    wall, _ = fleet(job, pipeline, drives, LocalPool(cores), root / "pool")
    rows.append((f"local pool, {cores} processes", wall))
    wall, own = fleet(job, pipeline, drives, LocalPool(1), root / "pool1")
    overhead.append(("local pool, 1 process", wall, own))
    import ray

    for cpus in (1, cores):  # a fresh Ray each time: cold workers, like the pool's processes
        backend = RayBackend("local", cpus)
        started = time.perf_counter()
        backend.connect()
        init_s = time.perf_counter() - started
        backend._owned = False  # stop Ray after the timing: a cluster is already running
        wall, own = fleet(job, pipeline, drives, backend, root / f"ray{cpus}")
        if cpus == 1:
            rows.append((f"local Ray, {cores} CPUs (+{init_s:.1f} s to start Ray)", wall))
        else:
            overhead.append((f"local Ray, {cpus} CPUs per task", wall, own))
        ray.shutdown()
    return rows, overhead


def measure_shipping(job, drives) -> list[tuple[str, float, float, float]]:
    """[(drive, MB, from path s, shipped s)]: best of 3 of one Ray task each way."""
    import ray

    from cuvil_perception.fleet.ray_backend import _run_drive
    from cuvil_perception.fleet.ray_connect import join
    from cuvil_perception.fleet.transport import pack

    join(ray, "local", ship_package=False)
    remote = ray.remote(_run_drive).options(num_cpus=1)
    rows = []
    try:
        for drive in drives:
            task = DriveTask(0, str(drive.path), drive.name)
            files = pack(str(drive.path))
            ray.get(remote.remote(job, task, None))  # a warm worker for both
            path_s, ship_s = [], []
            for _ in range(3):
                started = time.perf_counter()
                assert ray.get(remote.remote(job, task, None))["status"] == "ok"
                path_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                ref = ray.put(pack(str(drive.path)))
                assert ray.get(remote.remote(job, task, ref))["status"] == "ok"
                ship_s.append(time.perf_counter() - started)
            mb = sum(len(b) for b in files.values()) / 1e6
            rows.append((drive.name, mb, min(path_s), min(ship_s)))
    finally:
        ray.shutdown()
    return rows


def measure_joins(root: Path) -> list[tuple[str, float]]:
    """[(how, s)]: a new local Ray; a driver joining a head started with ``ray start``."""
    import signal
    import socket
    import subprocess

    import ray

    from cuvil_perception.fleet.ray_connect import join

    started = time.perf_counter()
    join(ray, "local", ship_package=False)
    rows = [("--ray local (start a private Ray)", time.perf_counter() - started)]
    ray.shutdown()
    with socket.socket() as probe:
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--node-ip-address",
                             "127.0.0.2", "--port", str(port), "--include-dashboard", "false",
                             "--num-cpus", "1", "--disable-usage-stats"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            env=dict(os.environ, RAY_AUTH_MODE="token"))
    try:
        for line in head.stdout:
            if "Ray runtime started" in line:
                break
        os.environ["RAY_AUTH_MODE"] = "token"
        started = time.perf_counter()
        join(ray, f"127.0.0.2:{port}", ship_package=False)
        rows.append(("--ray HOST:PORT (join a running head)", time.perf_counter() - started))
        ray.shutdown()
    finally:
        head.send_signal(signal.SIGTERM)
        head.wait(60)
        current = Path("/tmp/ray/ray_current_cluster")
        if current.exists() and current.read_text().strip() == f"127.0.0.2:{port}":
            current.unlink()
    return rows


if __name__ == "__main__":
    main()
