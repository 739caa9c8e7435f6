"""``cuvil-perception rt check``: what this machine's scheduler does to a periodic native loop.

Each trial runs on a fresh thread for an equal share of the time: a 1 ms periodic loop (absolute
wake-ups on the monotonic clock) that, every period, records how late it woke (timer sleep
overshoot) and then times ``CALLS_PER_TICK`` calls of a native kernel (``example.sum`` over 4096
floats, ~1 us) one by one. Trials: no knob, then each ``rt:`` knob alone, applied through the
same code a run uses (`knobs.apply_thread_knobs` / `apply_process_knobs`), so "took effect" is
exactly what a pipeline would get; a refusal is reported with the OS's reason. ``mlockall`` is
undone (munlockall) after its trial; cgroup placement is not tried (it moves the whole process):
the command reports whether it would be possible (`cgroup.placement_status`).

Jitter = max - p50 of the call latency. Times are in microseconds; absolute values depend on the
machine's load (on a shared machine the trials are comparable only side by side, in one run).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..os_threads import name_this_thread
from .knobs import RtKnobs, apply_process_knobs, apply_thread_knobs
from .sched_deadline import DeadlineParams

PERIOD_NS = 1_000_000
CALLS_PER_TICK = 4
TRIALS = ("none", "cpu_affinity", "fifo", "deadline", "mlockall")


@dataclass
class Trial:
    """One configuration: ``status`` "baseline", "applied" or "refused: <reason>"; samples µs."""

    knob: str
    status: str
    wake_us: np.ndarray
    call_us: np.ndarray

    def row(self) -> dict:
        wake = _pcts(self.wake_us, (50, 99))
        call = _pcts(self.call_us, (50, 99, 99.9))
        top = float(self.call_us.max()) if self.call_us.size else 0.0
        return {"knob": self.knob, "status": self.status, "wake_p50": wake[0],
                "wake_p99": wake[1], "wake_max": float(self.wake_us.max(initial=0.0)),
                "call_p50": call[0], "call_p99": call[1], "call_p999": call[2],
                "call_max": top, "jitter": top - call[0], "calls": int(self.call_us.size)}


def _pcts(values: np.ndarray, qs) -> list[float]:
    if values.size == 0:
        return [0.0] * len(qs)
    return [float(v) for v in np.percentile(values, qs)]


def _knobs_for(trial: str) -> RtKnobs:
    allowed = sorted(os.sched_getaffinity(0))
    return {"none": RtKnobs(), "cpu_affinity": RtKnobs(affinity={"compute": allowed[-1:]}),
            "fifo": RtKnobs(fifo_priority=10),
            "deadline": RtKnobs(deadline=DeadlineParams(PERIOD_NS // 2, PERIOD_NS, PERIOD_NS)),
            "mlockall": RtKnobs(mlockall=True)}[trial]


def periodic_loop(kernel, args: tuple, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """(wake-up overshoot µs per period, call latency µs per call) for ``seconds``."""
    wake, calls = [], []
    now = time.monotonic_ns
    start = now()
    tick = start
    while tick - start < seconds * 1e9:
        tick += PERIOD_NS
        delay = tick - now()
        if delay > 0:
            time.sleep(delay / 1e9)
        wake.append(now() - tick)
        for _ in range(CALLS_PER_TICK):
            t0 = time.perf_counter_ns()
            kernel(*args)
            calls.append(time.perf_counter_ns() - t0)
    return np.asarray(wake, np.float64) / 1e3, np.asarray(calls, np.float64) / 1e3


def run_trial(trial: str, seconds: float, kernel, args: tuple) -> Trial:
    """Apply one knob on a fresh thread (its scheduling class dies with it) and measure."""
    refusals: list[str] = []
    box: dict = {}
    knobs = _knobs_for(trial)

    def body() -> None:
        name_this_thread()  # cuvil-rtcheck-<trial>, cut to the kernel's 15 bytes
        apply_thread_knobs(knobs, "compute", refusals.append)
        box["samples"] = periodic_loop(kernel, args, seconds)

    if trial == "mlockall":
        apply_process_knobs(knobs, refusals.append)
    try:
        worker = threading.Thread(target=body, name=f"cuvil-rtcheck-{trial}")
        worker.start()
        worker.join()
    finally:
        if trial == "mlockall" and not refusals:
            ctypes.CDLL(None).munlockall()
    status = "baseline" if trial == "none" else \
        ("refused: " + "; ".join(refusals)) if refusals else "applied"
    return Trial(trial, status, *box["samples"])


def rt_check(seconds: float, trials=TRIALS) -> list[Trial]:
    """Every trial for ``seconds / len(trials)`` each, on the ``example.sum`` kernel."""
    from ..compile import get_kernel  # rt does not need compile/ until a kernel is measured
    from ..compile.examples import SUM

    kernel = get_kernel(SUM)
    data = np.ones(SUM.static["n"], np.float32)
    args = (data.ctypes.data,)
    kernel(*args)  # first call outside the measurement (page-in, branch predictors)
    share = seconds / len(trials)
    return [run_trial(trial, share, kernel, args) for trial in trials]
