"""The simple sequential executor: every stage of frame 0, then of frame 1, ... on one thread.

No deadlines, no overlap, no threads: the reference the real-time executor is compared against
(identical outputs; the benchmark's executor-overhead baseline). It records wall and CPU time per
stage and frame like the real executor, so its ``RunResult.report`` has the same table.
"""

from __future__ import annotations

import threading
import time

from ..errors import CuvilError, UsageError
from ..graph import FrameInfo, RunContext
from .clock import MonotonicClock
from .lifecycle import close_ops, is_source, open_all, sink_outputs
from .options import RunOptions, RunResult
from .stage_results import timing_row, wrap_error
from .stats import LatencyRecorder
from .trace import write_trace


def run_sequential(pipeline, options: RunOptions | None = None) -> RunResult:
    """Run a validated pipeline frame by frame on the calling thread (``frames``, ``clock``,
    ``progress``, ``warn`` and ``trace`` of ``options`` are honoured; deadlines are not)."""
    options = options or RunOptions()
    clock = options.clock or MonotonicClock()
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        if options.warn is not None:
            options.warn(message)

    stages = pipeline.ordered()
    if not any(is_source(s) for s in stages):
        raise UsageError("the pipeline has no source stage (replay, camera, ...): nothing "
                         "produces frames")
    ops = {s.id: s.make_op() for s in stages}
    open_all({sid: {"normal": op} for sid, op in ops.items()},
             RunContext(base_dir=pipeline.base_dir, live=options.live, warn=warn,
                        extra={"clock": clock}))
    recorder = LatencyRecorder()
    frames, t0, wall0 = 0, clock.now_ns(), time.perf_counter()
    try:
        while options.frames is None or frames < options.frames:
            if not _one_frame(stages, ops, frames, clock, recorder):
                break
            frames += 1
            if options.progress is not None:
                options.progress(frames, options.frames or 0)
    finally:
        close_ops(list(ops.items()), warn)
    result = RunResult(frames=frames, wall_s=time.perf_counter() - wall0,
                       report=recorder.report(stages, pipeline.e2e_deadline_ms,
                                              check_tags=not getattr(clock, "virtual", False)),
                       outputs=sink_outputs(pipeline), warnings=warnings, recorder=recorder,
                       t0_ns=t0)
    if options.trace is not None:
        result.trace_path = write_trace(options.trace, recorder.timings,
                                        {s.id: s.op for s in stages}, t0)
    return result


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
        recorder.add(timing_row(index, stage.id, "normal", start, clock.now_ns(),
                                time.thread_time_ns() - cpu0, threading.current_thread().name,
                                threading.get_native_id()))
    recorder.add_e2e(index, release, clock.now_ns())
    return True
