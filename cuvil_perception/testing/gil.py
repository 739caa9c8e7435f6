"""Prove GIL release by measurement: how fast a Python thread runs while your code runs.

::

    solo = python_rate_during(lambda: time.sleep(0.3))
    busy = python_rate_during(lambda: kernel(x_addr, y_addr, reps))
    assert busy > 0.3 * solo      # the kernel let the Python thread keep going

On a machine shared with other work, prefer ``CallProbe`` (below): it judges each call by
whether a Python thread ran during it, which load does not change.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Callable


def python_rate_during(fn: Callable[[], object]) -> float:
    """Increments per second that a pure-Python counting thread makes while ``fn()`` runs here.

    Compare with the rate during ``time.sleep`` of a similar length: a call that holds the GIL
    drops it to a few percent, a native call that releases it leaves most of it (on 2 cores).
    """
    stop, count = threading.Event(), [0]

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1
        count[0] = n

    thread = threading.Thread(target=spin, name="gil-probe")
    thread.start()
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        elapsed = time.perf_counter() - t0
        stop.set()
        thread.join()
    return count[0] / elapsed


class CallProbe:
    """Which calls of wrapped functions let a Python thread run *during* them (GIL released).

    Inside ``with probe:`` a Python thread notes the time (``time.perf_counter``, s) at most
    every ``tick_s``; ``probe.wrap(fn)`` times every call of ``fn`` (from any thread). During a
    call that holds the GIL the ticking thread cannot run: one tick-less stretch covers the whole
    native part of the call. During a call that releases it the thread keeps ticking. A call
    counts as *stalled* when its longest tick-less stretch is over half of its span (the GIL
    hand-over at either end of a call may take a while on a busy machine, hence not "any gap").
    Unlike a rate compared with a solo rate measured at another moment, this hardly depends on
    how loaded the machine is: load slows the call and the ticking thread alike::

        with CallProbe() as probe:
            fn = probe.wrap(kernel)
            ...  # run code that calls fn
        assert probe.progress_share() > 0.5
    """

    def __init__(self, tick_s: float = 0.0005):
        self.tick_s = tick_s
        self.ticks: list[float] = []
        self.calls: list[tuple[float, float]] = []  # (start, end) of each call, s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="gil-call-probe")

    def _tick(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            now = time.perf_counter()
            if now - last >= self.tick_s:
                self.ticks.append(now)
                last = now

    def __enter__(self) -> "CallProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def wrap(self, fn: Callable) -> Callable:
        """``fn`` with each call's (start, end) recorded."""
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls.append((start, time.perf_counter()))
        return timed

    def progress_share(self) -> float:
        """Share (0..1) of the recorded calls that did not stall the ticking thread (see the
        class docstring)."""
        if not self.calls:
            raise ValueError("no call was recorded: nothing to judge")
        ticks = sorted(self.ticks)
        kept = 0
        for start, end in self.calls:
            inside = ticks[bisect.bisect_right(ticks, start):bisect.bisect_left(ticks, end)]
            edges = [start, *inside, end]
            longest = max(b - a for a, b in zip(edges, edges[1:]))
            kept += longest <= (end - start) / 2
        return kept / len(self.calls)


def size_for(fn: Callable[[int], object], seconds: float, start: int = 100) -> int:
    """The ``n`` for which ``fn(n)`` (work linear in ``n``) takes about ``seconds`` here.

    Judged on the fastest of three timed calls, the one other processes disturbed least, after
    an untimed ``fn(1)`` (a first call may bind or load); ``n`` grows 4x until a call lasts
    10 ms, so the estimate is not a timer's noise.
    """
    fn(1)
    n = start
    while True:
        best = min(_timed(fn, n) for _ in range(3))
        if best >= 0.01 or n >= 10**9:
            return max(n, int(n * seconds / max(best, 1e-9)))
        n *= 4


def _timed(fn: Callable[[int], object], n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return time.perf_counter() - t0
