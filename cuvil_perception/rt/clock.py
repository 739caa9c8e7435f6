"""Clocks the executor measures deadlines and paces replays with.

All times are integer nanoseconds on a monotonic scale (never the wall-clock date), so a
system-time jump cannot create or hide a deadline miss. ``testing.clock.FakeClock`` implements the
same three members for deterministic deadline tests.
"""

from __future__ import annotations

import time


class MonotonicClock:
    """The real clock: ``time.monotonic_ns``.

    ``virtual`` is False: the executor may block on a queue with a timeout derived from this clock.
    """

    virtual = False

    def now_ns(self) -> int:
        """Monotonic time in ns."""
        return time.monotonic_ns()

    def sleep_until(self, t_ns: int) -> None:
        """Block the calling thread until ``now_ns() >= t_ns``."""
        delay = t_ns - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
