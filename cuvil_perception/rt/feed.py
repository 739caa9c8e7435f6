"""What a run has measured and decided so far, for io-side observers (the ``mcap`` sink, the live
Foxglove view): stage timings and deadline decisions, read incrementally.

The executor puts a ``RunFeed`` in ``RunContext.feed`` (ops reach it without importing rt/) and
the stage's id in ``RunContext.stage_id``; a sink that writes in the
background reports those writes back through ``add_background`` and waits for a frame to leave
the pipeline with ``wait_finished``. Both lists only grow; a reader keeps its own cursor, and
slicing a list another thread appends to is safe under the GIL, so reading takes no lock the
scheduler waits on.
"""

from __future__ import annotations

from .frame_timing import FrameTiming


class RunFeed:
    """Timings (``stats`` timing dicts, as the recorder's spool reads them back) and decisions (``policy`` entries) of the current run."""

    def __init__(self, recorder, policy, clock=None):
        self._recorder = recorder
        self._policy = policy
        self.clock = clock

    def set_policy(self, policy) -> None:
        """The run's ``DeadlinePolicy``, once its deadlines are resolved (after the ops opened,
        before frame 0: ``deadlines``)."""
        self._policy = policy

    def reader(self) -> "FeedReader":
        return FeedReader(self)

    def wait_finished(self, frame: int, timeout_s: float) -> bool:
        """Block until ``frame`` has left the pipeline (its e2e is recorded), at most
        ``timeout_s``; see ``LatencyRecorder.wait_finished``."""
        return self._recorder.wait_finished(frame, timeout_s)

    def add_background(self, stage_id: str, frame: int, start_ns: int, end_ns: int,
                       cpu_ns: int, worker: str, tid: int) -> None:
        """Record a sink's write that ran off the frame's path (``ops.background_writer``): a
        timing of variant ``background`` (its own row in the latency table, ``rt.stats``)."""
        self._recorder.add(FrameTiming(frame, stage_id, start_ns, end_ns, cpu_ns, worker, tid,
                                       "background"))


class FeedReader:
    """One observer's position in the feed: ``take()`` returns what arrived since the last call."""

    def __init__(self, feed: RunFeed):
        self._feed = feed
        self._timings = 0
        self._e2e = 0
        self._decisions = 0

    def take(self) -> tuple[list[dict], list[dict], list[dict]]:
        """(new stage timings, new e2e entries, new decisions), each in arrival order."""
        recorder, policy = self._feed._recorder, self._feed._policy
        timings = recorder.timings[self._timings:]
        e2e = recorder.e2e[self._e2e:]
        decisions = policy.decisions[self._decisions:] if policy is not None else []
        self._timings += len(timings)
        self._e2e += len(e2e)
        self._decisions += len(decisions)
        return timings, e2e, decisions
