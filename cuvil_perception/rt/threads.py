"""The threads a run's stages execute on (the scheduler's placement).

Each source reads ahead on its own thread (``read_ahead.SourceReader``); every other ``io`` stage has
one dedicated thread; ``compute`` stages share a pool of ``workers`` threads. Every thread takes
its OS name and applies the pipeline's ``rt:`` thread knobs (affinity, scheduling policy) when it
starts, and says what took effect in ``ledger`` (``thread_ledger``). A kernel's ``prange`` loops
called from a compute thread use that thread's share of the cores
(``placement.intra_op_threads``, what an ONNX network gets), from an io thread one thread
(``compile.lang.parallel``). Names: ``cuvil-compute_N`` (the pool), ``cuvil-io-<stage id>`` (a
source's reader, an io stage's thread).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from .placement import intra_op_threads
from .read_ahead import SourceReader
from .thread_ledger import ThreadLedger


class StageThreads:
    """The source readers, the io threads and the compute pool of one run."""

    def __init__(self, sources, workers, instances, options, knobs, warn, wake):
        """``sources``/``workers``: the source and other stages; ``wake()`` is called when a
        source has a new sample."""
        self.knobs, self.warn = knobs, warn
        self.ledger = ThreadLedger()
        # Paced replay: one sample ahead is enough (the pipeline idles between frames), and the
        # reader waits for those idle moments (``idle``) instead of competing with the frame
        # being processed for the CPU and the GIL. On a virtual clock (``FakeClock``) a read
        # competes with nothing and the gate's real-time timeout would only add thread timing to
        # the run: no gate there (the scheduler waits for each sample instead, see ``Scheduler``).
        depth = 1 if options.rate > 0 else options.read_ahead
        gated = options.rate > 0 and not options.live and not options.clock.virtual
        self.idle = threading.Event() if gated else None
        if self.idle is not None:
            self.idle.set()
        # A source that is not a live device (a video file given to --camera) never drops frames.
        self.readers = {s.id: SourceReader(s.id, instances[s.id]["normal"], options.clock,
                                           options.live and getattr(instances[s.id]["normal"],
                                                                    "live", True),
                                           depth, self._io_thread_start, wake, self.idle,
                                           options.rate)
                        for s in sources}
        share = intra_op_threads(options.worker_count())
        self.compute = ThreadPoolExecutor(options.worker_count(),
                                          thread_name_prefix="cuvil-compute",
                                          initializer=self._thread_start,
                                          initargs=(share, knobs, "compute", warn))
        self.io = {s.id: ThreadPoolExecutor(1, thread_name_prefix=f"cuvil-io-{s.id}",
                                            initializer=self._thread_start,
                                            initargs=(1, knobs, "io", warn, f"cuvil-io-{s.id}"))
                   for s in workers if s.effective_tag == "io"}

    def _io_thread_start(self) -> None:
        self._thread_start(1, self.knobs, "io", self.warn)

    def _thread_start(self, kernel_threads: int, *ledger_args) -> None:
        """A new thread: its prange share (``kernel_threads``), its name and knobs (ledger)."""
        from ..compile.lang.parallel import set_threads  # (rt needs compile/ only from here)

        set_threads(kernel_threads)
        self.ledger.start(*ledger_args)

    def start(self) -> None:
        """Start the source readers (the pools start threads as work arrives)."""
        for reader in self.readers.values():
            reader.start()

    def pool(self, stage_id: str) -> ThreadPoolExecutor:
        """Where a non-source stage runs: its own io thread, else the compute pool."""
        return self.io.get(stage_id, self.compute)

    def shutdown(self) -> int:
        """Stop the readers and wait for the pools; returns the live frames the readers
        skipped because the pipeline was behind."""
        for reader in self.readers.values():
            reader.stop()
        self.compute.shutdown(wait=True)
        for pool in self.io.values():
            pool.shutdown(wait=True)
        return sum(r.skipped for r in self.readers.values())
