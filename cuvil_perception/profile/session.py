"""Record pipelines under a sampler: worker processes, the sampler attached to each, runs
interleaved, stacks read back.

Each side (A, and B for ``--vs``) runs in its own worker process (`worker`), so the sampler
attaches to one side's process only and the two profiles never mix; the runs alternate A, B,
A, B, ... so both sides see the same machine load over time. The sampler attaches after the
worker's warm-up, so imports and model loading are not in the profile. ``sampler=None`` runs
the same way unprofiled (the overhead benchmark's baseline).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ExecutionError
from . import perf, pyspy
from .perfmap import PerfMap, map_path
from .stacks import Stacks
from .worker import HELPER_THREAD, IDLE_FRAME, RUN_FRAME, SETUP_FRAMES

READY_TIMEOUT_S = 60.0


@dataclass
class Recording:
    """One side's profile: its stacks (``frames`` = frames of all its runs) and each run's
    ``{"frames", "wall_s", "cpu_s", "e2e_p50_ms"}`` (`worker`)."""

    stacks: Stacks
    runs: list[dict] = field(default_factory=list)


def record(specs: list[dict], repeat: int, sampler: str | None, rate_hz: int,
           scratch: Path) -> list[Recording]:
    """Run each worker spec ``repeat`` times, interleaved, sampled by ``sampler`` (``py-spy``,
    ``perf`` or None) at ``rate_hz``; intermediate files go into ``scratch``."""
    workers = [_start_worker(spec, sampler, scratch / f"worker{i}.err")
               for i, spec in enumerate(specs)]
    samplers: list[subprocess.Popen] = []
    try:
        for w in workers:
            _reply(w)  # ready: warmed up
        outs = [scratch / f"samples{i}" for i in range(len(workers))]
        if sampler:
            samplers = [_start_sampler(sampler, w.pid, rate_hz, out, scratch / f"sampler{i}.err")
                        for i, (w, out) in enumerate(zip(workers, outs))]
        runs: list[list[dict]] = [[] for _ in workers]
        for _ in range(repeat):
            for i, w in enumerate(workers):
                _send(w, "run")
                runs[i].append(_reply(w))
        names = _finish(workers, samplers)
        recordings = []
        for i, w in enumerate(workers):
            stacks = _without_idle(_read(sampler, outs[i], w.pid, names[i], rate_hz)) \
                if sampler else Stacks(rate_hz=rate_hz)
            stacks.frames = sum(r["frames"] for r in runs[i])
            recordings.append(Recording(stacks, runs[i]))
        return recordings
    finally:
        for proc in samplers + workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for w in workers:
            map_path(w.pid).unlink(missing_ok=True)


def _finish(workers, samplers) -> list[dict[int, str]]:
    """Each worker's thread names (OS tid -> name); then the samplers stop (before the workers
    exit, so the interpreter's shutdown is not sampled) and the workers quit."""
    names = []
    for w in workers:
        _send(w, "threads")
        names.append({int(k): v for k, v in _reply(w)["threads"].items()})
    for s in samplers:
        s.send_signal(signal.SIGINT)
        s.wait(timeout=120)
    for w in workers:
        _send(w, "quit")
        w.wait(timeout=30)
    return names


def _start_worker(spec: dict, sampler: str | None, errors: Path) -> subprocess.Popen:
    env = dict(os.environ, CUVIL_PERF_MAP="1")  # the JIT kernels' names (worker's switch)
    if sampler == "perf" and sys.version_info >= (3, 12):
        env["PYTHONPERFSUPPORT"] = "1"  # Python frames in perf: the 3.12+ trampoline
    with open(errors, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cuvil_perception.profile.worker",
                                 json.dumps(spec)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    proc.errors_path = errors
    return proc


def _send(worker: subprocess.Popen, command: str) -> None:
    worker.stdin.write(command + "\n")
    worker.stdin.flush()


def _reply(worker: subprocess.Popen) -> dict:
    line = worker.stdout.readline()
    if not line:
        worker.wait()
        lines = worker.errors_path.read_text(errors="replace").strip().splitlines()
        raise ExecutionError(f"profile: the profiled process stopped (exit {worker.returncode})"
                             + (f": {lines[-1]}" if lines else ""))
    return json.loads(line)


def _start_sampler(sampler: str, pid: int, rate_hz: int, out: Path, errors: Path):
    module = pyspy if sampler == "py-spy" else perf
    log = open(errors, "w+")
    proc = subprocess.Popen(module.command(pid, rate_hz, out), stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:  # running: py-spy says so, perf has written its header
        if proc.poll() is not None:
            log.seek(0)
            raise ExecutionError(f"profile: {sampler} stopped: {log.read().strip()[-300:]}")
        log.seek(0)
        if ("Sampling process" in log.read()) if sampler == "py-spy" else \
                (out.exists() and out.stat().st_size > 0):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise ExecutionError(f"profile: {sampler} did not start within {READY_TIMEOUT_S:.0f} s")


def _read(sampler: str, out: Path, pid: int, names: dict[int, str], rate_hz: int) -> Stacks:
    if sampler == "py-spy":
        text = out.read_text(errors="replace") if out.exists() else ""
        return pyspy.read_raw(text, PerfMap.of_process(pid), names, rate_hz, (HELPER_THREAD,))
    return perf.read_script(perf.script(out), rate_hz, (HELPER_THREAD,))


def _without_idle(stacks: Stacks) -> Stacks:
    """Without the samples of a worker waiting for its next command (between its runs, and
    while the other side of ``--vs`` runs: the samplers may count that read as busy) and of
    each run's kernel prewarm and stage open and close (not per-frame work). Needs Python frames:
    perf before Python 3.12 keeps them all."""
    out = Stacks(rate_hz=stacks.rate_hz)
    for stack, count in stacks.counts.items():
        if IDLE_FRAME in stack and RUN_FRAME not in stack:
            continue
        if any(frame in stack for frame in SETUP_FRAMES):
            continue
        out.add(stack, count)
    return out
