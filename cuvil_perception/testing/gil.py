"""Prove GIL release by measurement: how fast a Python thread runs while your code runs.

::

    solo = python_rate_during(lambda: time.sleep(0.3))
    busy = python_rate_during(lambda: kernel(x_addr, y_addr, reps))
    assert busy > 0.3 * solo      # the kernel let the Python thread keep going
"""

from __future__ import annotations

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
