"""Source read-ahead: one thread per source stage feeding a bounded queue.

Replay: the reader runs up to ``depth`` samples ahead of the pipeline and blocks when the queue
is full, so disk reads overlap compute without unbounded memory. Paced replay (``rate > 0``) on
the real clock: each read also waits for the pipeline to be idle (at most one frame period).
Live: the queue holds one sample; when the pipeline is behind the reader replaces the waiting
sample with the newest one (counted in ``skipped``), so the pipeline always works on the
freshest camera frame.

Each read is timed like a stage (start/end on the run clock, thread CPU time), so the source
appears in the latency table and the trace.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

END = object()


@dataclass
class Read:
    """One timed ``Source.read()``: the sample (or END), its timing, or the exception raised."""

    sample: object
    start_ns: int
    end_ns: int
    cpu_ns: int
    worker: str
    tid: int
    error: BaseException | None = None


class SourceReader:
    """Runs ``op.read()`` on a dedicated thread named ``cuvil-io-<stage>``."""

    def __init__(self, stage_id: str, op, clock, live: bool, depth: int, on_start=None,
                 notify=None, gate: threading.Event | None = None, rate: float = 0.0):
        self.stage_id = stage_id
        self.op = op
        self.clock = clock
        self.live = live
        self.queue: queue.Queue = queue.Queue(maxsize=1 if live else max(1, depth))
        self.skipped = 0
        self._stop = threading.Event()
        self._on_start = on_start
        self._notify = notify  # called after each delivered sample (wakes the scheduler)
        self._gate = gate  # paced replay: read when the pipeline is idle (see _wait_for_gate)
        self._rate = rate
        self._stamps: list[int] = []  # the last two sample times (ns), to estimate the period
        self._thread = threading.Thread(target=self._loop, name=f"cuvil-io-{stage_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the reader to stop and wait for it (a read blocked in a driver may outlive this)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def get(self) -> Read:
        """The next read (blocks); END sample at the end of the stream or after an error."""
        return self.queue.get()

    def _loop(self) -> None:
        if self._on_start is not None:
            self._on_start()
        name, tid = threading.current_thread().name, threading.get_native_id()
        while not self._stop.is_set():
            self._wait_for_gate()
            start, cpu0 = self.clock.now_ns(), time.thread_time_ns()
            try:
                sample, error = self.op.read(), None
            except BaseException as exc:  # handed to the scheduler, which reports it
                sample, error = END, exc
            item = Read(END if sample is None else sample, start, self.clock.now_ns(),
                        time.thread_time_ns() - cpu0, name, tid, error)
            if item.sample is not END:
                self._stamps = (self._stamps + [item.sample.timestamp_ns])[-2:]
            self._put(item)
            if self._notify is not None:
                self._notify()
            if item.sample is END:
                return

    def _wait_for_gate(self) -> None:
        """Paced replay emulates sensors whose data is simply there at its time, so a read should
        not compete with the frame being processed: wait until the pipeline is idle, but at most
        one (paced) frame period, so a pipeline that is behind still gets its samples."""
        if self._gate is None:
            return
        period_s = 0.1
        if len(self._stamps) == 2 and self._rate > 0:
            period_s = (self._stamps[1] - self._stamps[0]) / 1e9 / self._rate
        self._gate.wait(min(max(period_s, 0.0), 1.0))

    def _put(self, item: Read) -> None:
        if self.live and item.sample is not END:
            try:
                self.queue.put_nowait(item)
            except queue.Full:
                try:  # behind: drop the waiting (older) sample, keep the newest
                    self.queue.get_nowait()
                    self.skipped += 1
                except queue.Empty:
                    pass
                self.queue.put(item)
            return
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
