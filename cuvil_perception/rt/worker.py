"""The worker-thread side of a scheduled stage call: run it, time it, report a ``Done``.

The scheduler submits these to the stage's thread (``threads.StageThreads.pool``) and settles
the ``Done`` events in frame order on its own thread; nothing here touches scheduling state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .schedstat import run_delay_ns
from .stage_results import timing_row


@dataclass
class Done:
    """A finished stage call, as reported to the scheduler."""

    frame: int
    stage: str
    variant: str
    outputs: dict | None
    timing: dict
    error: BaseException | None = None
    dropped: bool = False  # a process_dropped() call (a sink writing a dropped frame's line)


def execute(report, clock, recorder, stage_id, op, inputs, info, variant, reference) -> None:
    """Time ``op.process()`` (and, with ``reference``, the op's numpy twin, recorded as its own
    row) and ``report(Done)``; an exception travels in the ``Done``."""
    name, tid = threading.current_thread().name, threading.get_native_id()
    start, cpu0, wait0 = clock.now_ns(), time.thread_time_ns(), run_delay_ns()
    outputs, error = None, None
    try:
        outputs = op.process(inputs, info)
        if getattr(op, "reuses_output_buffers", False) and isinstance(outputs, dict):
            # the op overwrites these arrays on its next frame, which may start before
            # downstream stages (or a later reuse_last) are done with this one
            outputs = {port: value.copy() for port, value in outputs.items()}
    except BaseException as exc:  # reported by the scheduler thread
        error = exc
    end, cpu, wait = clock.now_ns(), time.thread_time_ns() - cpu0, run_delay_ns() - wait0
    if error is None and reference:
        rstart, rcpu0 = clock.now_ns(), time.thread_time_ns()
        try:
            op.reference_process(inputs, info)
        except BaseException as exc:
            error = exc
        recorder.add(timing_row(info.index, stage_id, "reference", rstart, clock.now_ns(),
                                time.thread_time_ns() - rcpu0, name, tid))
    timing = timing_row(info.index, stage_id, variant, start, end, cpu, name, tid)
    timing["wait_ns"] = wait  # runnable but without a core: not the stage's own waiting
    report(Done(info.index, stage_id, variant, outputs, timing, error))


def execute_dropped(report, stage_id, op, info, reason) -> None:
    """A dropped frame at a sink: ``op.process_dropped`` (not timed), then ``report(Done)``."""
    error = None
    try:
        op.process_dropped(info, dict(reason))
    except BaseException as exc:  # reported by the scheduler thread
        error = exc
    report(Done(info.index, stage_id, "normal", None, {}, error, dropped=True))
