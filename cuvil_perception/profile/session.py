"""Record pipelines under a sampler: worker processes, the sampler attached to each, runs
interleaved, stacks read back.

Each side (A, and B for ``--vs``) runs in its own worker process (`worker`), so the sampler
attaches to one side's process only and the two profiles never mix; the runs alternate A, B,
A, B, ... so both sides see the same machine load over time. The sampler attaches once, after
the worker's warm-up, so imports and model loading are not in the profile, and stays attached
for all the runs (`attach` / `detach`, which the overhead benchmark uses the same way).
``sampler=None`` runs the same way unprofiled. The threads' names are polled from here
(`threadnames`), not from inside the worker.
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
from .threadnames import ThreadNames
from .worker import IDLE_FRAME, RUN_FRAME, SETUP_FRAMES

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 120.0


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
    workers = [start_worker(spec, sampler, scratch / f"worker{i}.err")
               for i, spec in enumerate(specs)]
    samplers: list[subprocess.Popen] = []
    names = ThreadNames([w.pid for w in workers])
    try:
        for w in workers:
            reply(w)  # ready: warmed up
        outs = [scratch / f"samples{i}" for i in range(len(workers))]
        if sampler:
            samplers = [attach(sampler, w.pid, rate_hz, out, scratch / f"sampler{i}.err")
                        for i, (w, out) in enumerate(zip(workers, outs))]
        names.start()
        runs: list[list[dict]] = [[] for _ in workers]
        for _ in range(repeat):
            for i, w in enumerate(workers):
                send(w, "run")
                runs[i].append(reply(w))
        seen = names.stop()
        # the samplers stop before the workers exit: the interpreter's shutdown is not sampled
        for s in samplers:
            detach(s)
        for w in workers:
            send(w, "quit")
            w.wait(timeout=30)
        recordings = []
        for i, w in enumerate(workers):
            stacks = read_samples(sampler, outs[i], w.pid, seen[w.pid], rate_hz) \
                if sampler else Stacks(rate_hz=rate_hz)
            stacks.frames = sum(r["frames"] for r in runs[i])
            recordings.append(Recording(stacks, runs[i]))
        return recordings
    finally:
        names.stop()
        for proc in samplers + workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for w in workers:
            map_path(w.pid).unlink(missing_ok=True)


def detach(proc: subprocess.Popen) -> float:
    """Stops a sampler (it writes its output on SIGINT); its CPU seconds, user + system."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # wait4: the child's CPU time
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.02)
    raise ExecutionError(f"profile: the sampler did not stop within {STOP_TIMEOUT_S:.0f} s")


def start_worker(spec: dict, sampler: str | None, errors: Path) -> subprocess.Popen:
    env = dict(os.environ, CUVIL_PERF_MAP="1")  # the JIT kernels' names (worker's switch)
    if sampler == "perf" and sys.version_info >= (3, 12):
        env["PYTHONPERFSUPPORT"] = "1"  # Python frames in perf: the 3.12+ trampoline
    with open(errors, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cuvil_perception.profile.worker",
                                 json.dumps(spec)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    proc.errors_path = errors
    return proc


def send(worker: subprocess.Popen, command: str) -> None:
    worker.stdin.write(command + "\n")
    worker.stdin.flush()


def reply(worker: subprocess.Popen) -> dict:
    line = worker.stdout.readline()
    if not line:
        worker.wait()
        lines = worker.errors_path.read_text(errors="replace").strip().splitlines()
        raise ExecutionError(f"profile: the profiled process stopped (exit {worker.returncode})"
                             + (f": {lines[-1]}" if lines else ""))
    return json.loads(line)


def attach(sampler: str, pid: int, rate_hz: int, out: Path, errors: Path):
    """Starts ``sampler`` on ``pid`` at ``rate_hz``, writing to ``out``; returns once it
    samples."""
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


def read_samples(sampler: str, out: Path, pid: int, names: dict[int, str],
                 rate_hz: int) -> Stacks:
    """The stacks ``sampler`` wrote to ``out`` for worker ``pid`` (threads named from
    ``names``, OS tid -> name), without the samples of its waits and its runs' set-up."""
    return _without_idle(_read(sampler, out, pid, names, rate_hz))


def _read(sampler: str, out: Path, pid: int, names: dict[int, str], rate_hz: int) -> Stacks:
    if sampler == "py-spy":
        text = out.read_text(errors="replace") if out.exists() else ""
        return pyspy.read_raw(text, PerfMap.of_process(pid), names, rate_hz)
    return perf.read_script(perf.script(out), rate_hz)


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
