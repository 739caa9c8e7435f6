"""``run_pipeline``: open, prewarm, schedule frames, close, and write what happened.

Order of a run: check the options, the ``rt:`` knobs and the output-path policy (nothing is
written before this) -> write the run record with ``status: "running"`` -> build every op (both
variants of degradable stages) -> prewarm their kernels -> snapshot the compile counters ->
open them (ops bind kernels and run their warm-up passes in ``open``; ``deadline_ms: auto``
stages without a cached value time extra passes) -> resolve every stage deadline to ms
(``deadlines``: explicit, cached for this machine, or measured now) -> deadline policy,
admission control and placement lines with those ms -> schedule frames (``scheduler``) -> stop the
threads -> close every op (sinks flush, even after a failure) -> latency report, trace, the
finished run record -> raise ``DeadlineFailure`` / the stage's error if the run stopped early.
What the run builds and how it goes is kept in one ``RunState`` (``run_state``).
The record says how every run ended, failed, interrupted and terminated ones included
(``record`` documents ``status``); SIGTERM is handled like Ctrl-C.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import replace
from functools import partial

from ..errors import DeadlineFailure, OutputWriteError, UsageError
from ..graph import RunContext, preflight
from .admission import KIND as ADMISSION_SKIP, AdmissionControl
from .clock import MonotonicClock
from .deadlines import AutoDeadlines, with_deadlines
from .feed import RunFeed
from .knobs import (apply_process_knobs, apply_thread_knobs, parse_knobs,
                    scheduler_thread_knobs)
from .lifecycle import all_ops, build_instances, close_ops, is_source, open_all
from .op_prewarm import compile_counters, prewarm_ops
from .options import RunOptions, RunResult
from .placement import intra_op_threads, opencv_threads, placement_lines
from .policy import DeadlinePolicy, load_decisions
from .record_build import build_record
from .run_files import RecordFile, hold_outputs, plan
from .run_state import RunState
from .scheduler import Scheduler
from .signals import sigterm_as_interrupt, stop_signal


def run_pipeline(pipeline, options: RunOptions | None = None) -> RunResult:
    """Run a validated ``Pipeline`` and return its ``RunResult``.

    Ctrl-C (KeyboardInterrupt) stops the run after the stages already running; the result has
    ``interrupted=True`` and the record is written. Raises ``DeadlineFailure`` (with
    ``report``) when an ``on_miss: fail`` fires, ``ExecutionError`` when a stage raises, the
    op's own ``CuvilError`` (e.g. ``DriveError``) unchanged, and ``UsageError`` for impossible
    options. Ops are closed in every case.
    """
    options = options or RunOptions()
    if options.clock is None:
        options = replace(options, clock=MonotonicClock())
    state = RunState(pipeline, options)
    _check_options(options, pipeline.ordered())
    knobs = parse_knobs(pipeline)
    preflight(pipeline)  # the file checks inspect makes too (source, model files, drive index)
    recorded = load_decisions(options.decisions, pipeline, state.warn) if options.decisions \
        else None
    record_path = plan(pipeline, options)
    record = RecordFile(record_path, pipeline, options) if record_path is not None else None
    locks = hold_outputs(pipeline, options)  # exit 2 when another run writes one of them
    with sigterm_as_interrupt():
        try:
            if record is not None:
                record.start()
            return _run(state, knobs, recorded, record)
        except BaseException as exc:
            if record is not None and not record.finished:
                _abort_record(record, exc)
            raise
        finally:
            locks.release()


def _abort_record(record, exc: BaseException) -> None:
    """Mark the record of a run that ended before it could be finished."""
    if isinstance(exc, KeyboardInterrupt):
        signal_name = stop_signal(exc)
        status = "terminated" if signal_name == "SIGTERM" else "interrupted"
        reason = f"{status} ({signal_name}) before the first frame"
    else:
        status, reason = "failed", f"{type(exc).__name__}: {exc}"
    try:
        record.abort(status, reason)
    except OutputWriteError:
        pass  # the disk is full: the "running" record stays, the error says what happened


def _run(state: RunState, knobs, recorded, record) -> RunResult:
    pipeline, options = state.pipeline, state.options
    instances = build_instances(pipeline)
    threads = intra_op_threads(options.worker_count())
    auto = AutoDeadlines(pipeline, threads, options.deadline_cache)
    feed = RunFeed(state.recorder, None, options.clock)
    # thread_init: what an op's own thread calls first (a sink's background writer), so that it
    # runs under the same rt knobs as the io threads: a writer left at normal priority would be
    # preempted while it holds the GIL that the SCHED_FIFO threads wait for
    ctx = RunContext(base_dir=pipeline.base_dir, live=options.live, warn=state.warn,
                     note=options.note, clock=options.clock, feed=feed, intra_op_threads=threads,
                     thread_init=partial(apply_thread_knobs, knobs, "io", state.warn))
    state.prewarm = prewarm_ops(all_ops(instances))  # before open(): ops bind kernels there
    # Snapshot before open(): a kernel an op binds in open() without declaring it in kernels()
    # is a compile after prewarm too (and `compile --target` would not emit it).
    counters = compile_counters()
    _open(state, instances, knobs, ctx, auto)
    pipeline = state.pipeline  # every deadline in ms from here on
    state.policy = DeadlinePolicy(pipeline.ordered(), options.deadlines_enforced(), recorded,
                                  pipeline.e2e_deadline_ms)
    feed.set_policy(state.policy)
    if record is not None:  # the scheduler reports progress through state.options
        state.options = options = replace(
            options, progress=_with_record_progress(options.progress, record))
    admission = _admission(pipeline, options, recorded, instances)
    scheduler = Scheduler(state, instances, knobs, admission)
    state.placement = placement_lines(pipeline, instances, options.worker_count(), knobs,
                                      threads, state.deadlines)
    try:
        apply_process_knobs(knobs, state.warn)
        for monitor in options.monitors:
            monitor.attach(scheduler, state.recorder, state.policy, counters)
        with opencv_threads(threads):
            _schedule(scheduler)
    finally:
        failed_write = close_ops(all_ops(instances), state.warn)
        for monitor in options.monitors:
            monitor.finish()
    if failed_write is not None and state.error is None:
        state.error = failed_write  # a sink's last background write failed: the run did too
    state.compile = {"before_frame0": counters, "after_run": compile_counters()}
    return _finish(state, record)


def _open(state: RunState, instances, knobs, ctx, auto: AutoDeadlines) -> None:
    """Open every op, with timed warm-up passes where an ``auto`` deadline needs them, then
    resolve every stage deadline to ms: ``state.pipeline`` becomes a copy carrying them (the
    caller's pipeline keeps ``auto``) and ``state.deadlines`` says how each was obtained."""
    timed = auto.timed_passes()
    # Timed warm-up passes run as the frames will: under the run's SCHED_FIFO when it asks for
    # one (--rt-fifo, rt.sched), else a loaded machine's other work lands in the measurement.
    with scheduler_thread_knobs(knobs, state.warn) if timed else nullcontext():
        open_all(instances, ctx, timed)
    try:
        state.deadlines = auto.resolve(instances, state.warn)
    except BaseException:
        close_ops(all_ops(instances), state.warn)
        raise
    state.pipeline = with_deadlines(state.pipeline, state.deadlines)


def _with_record_progress(progress, record):
    def both(done: int, total: int) -> None:
        record.progress(done)
        if progress is not None:
            progress(done, total)

    return both


def _admission(pipeline, options: RunOptions, recorded, instances) -> AdmissionControl:
    """Shedding acts on enforced real-time runs; a ``--decisions`` replay re-applies the
    recorded skips instead (see ``admission``). The costs start from the timed warm-up passes
    of ``auto`` stages, so the first frames are predicted too."""
    workers = [s for s in pipeline.ordered() if not is_source(s)]
    active = options.shed and options.deadlines_enforced() and (options.rate > 0 or options.live)
    skips = None if recorded is None else \
        {d["frame"] for d in recorded if d.get("kind") == ADMISSION_SKIP}
    admission = AdmissionControl(workers, pipeline.e2e_deadline_ms, active, skips,
                                 workers=options.worker_count())
    for stage in workers:
        for elapsed in getattr(instances[stage.id]["normal"], "warmup_ns", ()):
            admission.observe(stage.id, "normal", elapsed)
    return admission


def _schedule(scheduler) -> None:
    """Run the frames (``state.wall_s``: their wall time). Threads are stopped in every case."""
    state, wall0 = scheduler.state, time.perf_counter()
    scheduler.start()
    try:
        with scheduler_thread_knobs(scheduler.knobs, state.warn, scheduler.threads.ledger):
            scheduler.run()
    except KeyboardInterrupt as exc:
        # Ctrl-C or SIGTERM ends a run: keep what finished, close cleanly, still report.
        state.interrupted = True
        state.stop_signal = stop_signal(exc)
    finally:
        scheduler.shutdown()
        state.threads = scheduler.threads.ledger.rows()
        state.placement.append(scheduler.threads.ledger.summary())
    state.wall_s = time.perf_counter() - wall0


MIN_RATE, MAX_RATE = 1e-3, 1e3  # paced replay: 1 frame a 100 s .. 10 kHz at a 10 Hz drive


def _check_options(options: RunOptions, stages) -> None:
    if options.frames is not None and options.frames < 1:
        raise UsageError(f"--frames must be at least 1, got {options.frames}")
    if not (options.rate == 0 or MIN_RATE <= options.rate <= MAX_RATE):  # NaN fails both
        raise UsageError(f"--rate must be 0 (as fast as possible) or from {MIN_RATE:g} to "
                         f"{MAX_RATE:g} (times recorded real time), got {options.rate:g}")
    if options.workers is not None and options.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {options.workers}")
    by_id = {s.id: s for s in stages}
    for stage_id in options.reference_stages:
        stage = by_id.get(stage_id)
        if stage is None:
            raise UsageError(f"reference timing asked for stage '{stage_id}', which the pipeline "
                             f"does not have")
        if not callable(getattr(stage.op_cls, "reference_process", None)):
            raise UsageError(f"stage '{stage_id}': op '{stage.op}' has no reference_process(), "
                             "so it cannot be timed against its numpy reference")


def _finish(state: RunState, record) -> RunResult:
    """The result, the finished run record, then the run's error or ``fail`` decision."""
    result = state.result()
    if record is not None:
        try:
            result.record_path = record.finish(build_record(state, result), state.status())
        except OutputWriteError as exc:
            if state.error is None:
                raise
            record.finished = True  # the run's own error (often the same full disk) comes first
            state.warn(str(exc))
    if state.error is not None:
        raise state.error
    if state.failure is not None:
        raise _deadline_failure(state.failure, result)
    return result


def _deadline_failure(failure: dict, result: RunResult) -> DeadlineFailure:
    where = f" (run record: {result.record_path})" if result.record_path else ""
    message = (f"deadline miss at stage '{failure['stage']}' (op {failure['op']}) on frame "
               f"{failure['frame']}: {failure['elapsed_ms']:.3f} ms > "
               f"{failure['deadline_ms']} ms, on_miss: fail; stopped after "
               f"{result.frames} complete frame(s){where}")
    report = dict(failure, frames_completed=result.frames, actions=result.actions,
                  record=str(result.record_path) if result.record_path else None,
                  summary=[row.as_dict() for row in result.report.rows])
    error = DeadlineFailure(message, report)
    error.result = result
    return error
