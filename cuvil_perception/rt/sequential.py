"""The simple sequential executor: every stage of frame 0, then of frame 1, ... on one thread.

No deadlines, no overlap, no threads: the reference the real-time executor is compared against
(identical outputs; the benchmark's executor-overhead baseline). It records wall and CPU time per
stage and frame like the real executor into the same ``RunState``, so its ``RunResult`` is
made the same way and its ``report`` has the same table.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from ..errors import CuvilError, UsageError
from ..graph import FrameInfo, RunContext
from .clock import MonotonicClock
from .lifecycle import close_ops, is_source, open_all
from .options import RunOptions, RunResult
from .run_state import RunState
from .frame_timing import FrameTiming
from .stage_results import wrap_error


def run_sequential(pipeline, options: RunOptions | None = None) -> RunResult:
    """Run a validated pipeline frame by frame on the calling thread (``frames``, ``clock``,
    ``progress``, ``warn`` and ``trace`` of ``options`` are honoured; deadlines are not)."""
    options = options or RunOptions()
    if options.clock is None:
        options = replace(options, clock=MonotonicClock())
    state, clock = RunState(pipeline, options), options.clock
    stages = pipeline.ordered()
    if not any(is_source(s) for s in stages):
        raise UsageError("the pipeline has no source stage (replay, camera, ...): nothing "
                         "produces frames")
    ops = {s.id: s.make_op() for s in stages}
    open_all({sid: {"normal": op} for sid, op in ops.items()},
             RunContext(base_dir=pipeline.base_dir, live=options.live, warn=state.warn,
                        note=options.note, clock=clock))
    state.t0_ns, wall0 = clock.now_ns(), time.perf_counter()
    completed = False
    try:
        while options.frames is None or state.frames < options.frames:
            if not _one_frame(stages, ops, state.frames, clock, state.recorder):
                break
            state.frames += 1
            if options.progress is not None:
                options.progress(state.frames, options.frames or 0)
        completed = True
    finally:
        failed_write = close_ops(list(ops.items()), state.warn)
    if completed and failed_write is not None:
        raise failed_write  # a sink's background write failed at close (see close_ops)
    state.wall_s = time.perf_counter() - wall0
    return state.result()


def _one_frame(stages, ops, index, clock, recorder) -> bool:
    """Run every stage for frame ``index``; False when a source has ended."""
    values: dict[str, dict] = {}
    info = FrameInfo(index, 0)
    release = clock.now_ns()
    for stage in stages:
        start, cpu0 = clock.now_ns(), time.thread_time_ns()
        try:
            if is_source(stage):
                sample = ops[stage.id].read()
                if sample is None:
                    return False
                outputs = sample.outputs
                if info.timestamp_ns == 0:
                    info.timestamp_ns, info.stamps = sample.timestamp_ns, dict(sample.stamps)
            else:
                inputs = {p: values[r.stage][r.port] for p, r in stage.inputs.items()}
                outputs = ops[stage.id].process(inputs, info)
        except CuvilError:
            raise
        except Exception as exc:
            raise wrap_error(exc, stage, index) from exc
        values[stage.id] = outputs
        recorder.add(FrameTiming(index, stage.id, start, clock.now_ns(),
                                 time.thread_time_ns() - cpu0, threading.current_thread().name,
                                 threading.get_native_id()))
    recorder.add_e2e(index, release, clock.now_ns())
    return True
