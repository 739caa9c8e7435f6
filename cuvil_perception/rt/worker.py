"""The worker-thread side of a scheduled stage call: run it, time it, report a ``Done``.

The scheduler submits a ``StageCall`` to the stage's thread (``threads.StageThreads.pool``) and
settles the ``Done`` events in frame order on its own thread; nothing here touches scheduling
state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..graph import FrameInfo
from .frame_timing import FrameTiming
from .schedstat import run_delay_ns


@dataclass
class Done:
    """A finished stage call, as reported to the scheduler (``timing``: None for a dropped
    frame's ``process_dropped``, which is not timed)."""

    frame: int
    stage: str
    variant: str
    outputs: dict | None
    timing: FrameTiming | None
    error: BaseException | None = None
    dropped: bool = False  # a process_dropped() call (a sink writing a dropped frame's line)


@dataclass(frozen=True)
class Reporting:
    """Where every call of a run reports: ``report(Done)`` (the scheduler's event queue), the
    run's clock (``now_ns``), and the recorder that takes side timings (``reference``)."""

    report: Callable[[Done], None]
    clock: Any
    recorder: Any


@dataclass(frozen=True)
class StageCall:
    """One call of ``stage_id``'s ``op`` on frame ``info.index``.

    inputs: port name -> array; variant: ``normal`` or ``degraded`` (which instance ``op`` is);
    reference: also time the op's numpy twin on the same inputs; dropped: the drop reason when
    this is a sink's ``process_dropped`` call instead of ``process``.
    """

    to: Reporting
    stage_id: str
    op: Any
    info: FrameInfo
    inputs: dict
    variant: str = "normal"
    reference: bool = False
    dropped: dict | None = None


def execute(call: StageCall) -> None:
    """Time ``op.process()`` (and, with ``reference``, the op's numpy twin, recorded as its own
    row) and ``report(Done)``; an exception travels in the ``Done``."""
    op, info, clock = call.op, call.info, call.to.clock
    name, tid = threading.current_thread().name, threading.get_native_id()
    start, cpu0, wait0 = clock.now_ns(), time.thread_time_ns(), run_delay_ns()
    outputs, error = None, None
    try:
        outputs = op.process(call.inputs, info)
        if getattr(op, "reuses_output_buffers", False) and isinstance(outputs, dict):
            # the op overwrites these arrays on its next frame, which may start before
            # downstream stages (or a later reuse_last) are done with this one
            outputs = {port: value.copy() for port, value in outputs.items()}
    except BaseException as exc:  # reported by the scheduler thread
        error = exc
    end, cpu, wait = clock.now_ns(), time.thread_time_ns() - cpu0, run_delay_ns() - wait0
    if error is None and call.reference:
        rstart, rcpu0 = clock.now_ns(), time.thread_time_ns()
        try:
            op.reference_process(call.inputs, info)
        except BaseException as exc:
            error = exc
        call.to.recorder.add(FrameTiming(info.index, call.stage_id, rstart, clock.now_ns(),
                                         time.thread_time_ns() - rcpu0, name, tid, "reference"))
    # wait_ns: runnable but without a core, which is not the stage's own waiting
    timing = FrameTiming(info.index, call.stage_id, start, end, cpu, name, tid, call.variant,
                         wait_ns=wait)
    call.to.report(Done(info.index, call.stage_id, call.variant, outputs, timing, error))


def execute_dropped(call: StageCall) -> None:
    """A dropped frame at a sink: ``op.process_dropped`` (not timed), then ``report(Done)``."""
    error = None
    try:
        call.op.process_dropped(call.info, dict(call.dropped))
    except BaseException as exc:  # reported by the scheduler thread
        error = exc
    call.to.report(Done(call.info.index, call.stage_id, "normal", None, None, error,
                        dropped=True))
