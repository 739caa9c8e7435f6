"""A fake clock: time moves only when a test (or a test op) says so.

Pass it as ``RunOptions(clock=FakeClock())``; the executor measures every stage on it, so an op
that calls ``clock.advance_ms(30)`` inside ``process()`` "takes" exactly 30 ms, whatever the machine
does. ``sleep_until`` jumps forward instead of sleeping, so paced replays (``rate 1.0``) run at full
speed. The clock is thread-safe; with several workers the advances of overlapping stages add up,
so deadline tests that need exact per-stage costs run with ``workers=1``. The scheduler itself
waits for each source sample and, while stages run, sees the clock only up to the results it has
settled, so a paced run's admission, pacing and e2e decisions do not depend on thread timing.
"""

from __future__ import annotations

import threading


class FakeClock:
    """Monotonic ns under test control; ``virtual`` tells the executor never to wait on it."""

    virtual = True

    def __init__(self, start_ns: int = 1_000_000_000):
        self._now = int(start_ns)
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ns: int) -> None:
        """Move time forward by ``ns`` nanoseconds (negative values are refused)."""
        if ns < 0:
            raise ValueError(f"a clock cannot go backwards ({ns} ns)")
        with self._lock:
            self._now += int(ns)

    def advance_ms(self, ms: float) -> None:
        self.advance(round(ms * 1e6))

    def sleep_until(self, t_ns: int) -> None:
        """Jump to ``t_ns`` if it is in the future; never blocks."""
        with self._lock:
            self._now = max(self._now, int(t_ns))
