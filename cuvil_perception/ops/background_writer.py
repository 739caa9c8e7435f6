"""A sink's writes on a thread of their own, in frame order, a bounded number of frames behind.

Why: a sink that encodes and writes a lot per frame (the ``mcap`` sink: a JPEG, a 1.6 MB point
cloud copied twice, the chunk write, ~4-8 ms) otherwise sits on every frame's end-to-end path,
after the detectors and fusion. With ``BackgroundWriter`` the sink's ``process()`` only queues
the frame (its input arrays belong to the frame and are never modified afterwards, see
``rt.scheduler``) and returns; one thread runs the queued writes strictly in submission order.

What stays true:

* order: one thread, FIFO, so the file is written in frame order, as before;
* bounded: at most ``depth`` frames wait; a sink that cannot keep up blocks in ``submit`` and
  that wait is part of its stage time (and of e2e) again;
* errors: the first failed write (disk full) is raised by the next ``submit`` or by ``drain`` /
  ``close``, unchanged (an ``OutputWriteError`` stays one); nothing is written after it;
* honest timing: each write is reported (``report(frame, start_ns, end_ns, cpu_ns, worker,
  tid)``) so the run's latency table shows it as its own row (``<stage>@background``) and the
  time until a frame is written (``e2e+background``), see ``rt.stats``.

What changes: a kill -9 may lose up to ``depth`` frames the run had already counted (the file
still holds every frame the writer finished, readable as before).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

_STOP = object()


class BackgroundWriter:
    """One writer thread. ``clock``: an object with ``now_ns()`` (the run's clock) or None for
    ``time.monotonic_ns``; ``report``: called after every write with its timing, or None;
    ``init``: called first on the thread (the executor's io-thread knobs: SCHED_FIFO, affinity).
    """

    def __init__(self, name: str, depth: int = 2, clock=None,
                 report: Callable[..., None] | None = None,
                 init: Callable[[], None] | None = None):
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._now = clock.now_ns if clock is not None else time.monotonic_ns
        self._report = report
        self._error: BaseException | None = None
        self._init = init
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, frame: int, write: Callable[[], None]) -> None:
        """Queue ``write()`` for ``frame`` (blocks while ``depth`` frames wait); raises the
        error of an earlier write instead, once."""
        self._raise_pending()
        self._queue.put((frame, write))

    def drain(self) -> None:
        """Wait until every queued write has run; raise the first error, if any."""
        self._queue.join()
        self._raise_pending()

    def close(self) -> None:
        """Drain, then stop the thread; raises like ``drain`` (the thread is stopped first)."""
        if not self._thread.is_alive():
            self._raise_pending()
            return
        self._queue.put((None, _STOP))
        self._thread.join()
        self._raise_pending()

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        failed = False
        if self._init is not None:
            self._init()
        while True:
            frame, write = self._queue.get()
            try:
                if write is _STOP:
                    return
                if failed:
                    continue  # nothing is written after a failed write
                start, cpu0 = self._now(), time.thread_time_ns()
                try:
                    write()
                except BaseException as exc:  # raised on the sink's thread by submit/drain
                    self._error, failed = exc, True
                    continue
                if self._report is not None:
                    self._report(frame, start, self._now(), time.thread_time_ns() - cpu0,
                                 self._thread.name, threading.get_native_id())
            finally:
                self._queue.task_done()
