"""``FrameTiming``: the typed record of one timed stage call (or source read, or a sink's write on
its own thread), and the columns the latency recorder's spool stores it in.

A timing is built once, complete, where the call ended; the scheduler's deadline decision gives
it its ``outcome`` with ``with_outcome`` (a new record, never an edit). The recorder stores it
as a row of a ``spool.Spool`` (``as_row``), and every reader (the run record, the Chrome trace,
OTLP spans, Prometheus metrics, the latency table, bench) reads those rows back as plain dicts:
the dict is the record's JSON form, and the spool decodes rows in the column order below, so the
record's key order does not depend on who built the timing.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class FrameTiming:
    """One timed call on the run's monotonic clock.

    frame: frame index; stage: stage id; start_ns / end_ns: run clock (ns); cpu_ns: thread CPU
    time inside the call (``time.thread_time_ns``); worker / tid: the thread's name and native
    id (None where unknown: samples rebuilt from a fleet summary); variant: ``normal``,
    ``degraded``, ``reference`` or ``background``; outcome: ``ok``, ``miss:<action>`` or
    ``skipped``; wait_ns: run-queue wait inside the call (``schedstat``; compute stage calls on
    Linux only, None elsewhere).
    """

    frame: int
    stage: str
    start_ns: int
    end_ns: int
    cpu_ns: int
    worker: str | None = None
    tid: int | None = None
    variant: str = "normal"
    outcome: str = "ok"
    wait_ns: int | None = None

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns

    def with_outcome(self, outcome: str) -> "FrameTiming":
        return replace(self, outcome=outcome)

    def as_row(self) -> dict:
        """The record's dict form; a None field is left out (it reads back missing)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


def _columns(kind: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(FrameTiming) if str(f.type).split(" |")[0] == kind)


# The spool's columns: the int fields, then the text fields, each in declaration order.
TIMING_INTS = _columns("int")
TIMING_TEXTS = _columns("str")
