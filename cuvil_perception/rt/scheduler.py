"""The frame scheduler: admits frames, dispatches ready stages, settles results in frame order.

Placement: each source reads ahead on its own thread; every other ``io`` stage has one dedicated
thread; ``compute`` stages share a pool of ``workers`` threads (``threads``); a stage call runs
there (``worker``) and reports back. The scheduler itself runs on the calling thread and only
moves references around; how the run went goes into its ``RunState`` (``run_state``).

Ordering rule: a stage runs frame ``f`` only after it finished frame ``f-1`` and all its inputs
for ``f`` exist. Different stages work on different frames at the same time (pipelining, up to
``max_in_flight`` frames), but each stage — sinks included — sees its frames strictly in order
and one at a time. An op's output therefore depends only on its input sequence, never on thread
timing: that is what makes outputs identical for any worker count.

Output ownership: once ``process()`` returns, its arrays belong to the frame (downstream
stages of this frame read them while the op already works on the next frame, and ``reuse_last``
may hand them out again later). An op that writes its outputs into persistent buffers sets the
class attribute ``reuses_output_buffers = True``; the executor then copies them on the worker.

Dropped and stale values: what a frame holds, and what the deadline decisions (drop,
reuse_last, e2e_miss, an admission skip) do to it, is ``frame_values``: every removal goes
through ``Frame.drop`` (``Scheduler.drop``), and sinks that implement ``process_dropped`` still
get a dropped frame in order, so outputs keep one line per input frame.
"""

from __future__ import annotations

import queue

from ..graph import FrameInfo
from .frame_values import DROPPED, Frame, StageOutcomes
from .lifecycle import ancestors, is_source
from .frame_timing import FrameTiming
from .read_ahead import END
from .stage_results import check_outputs, wrap_error
from .threads import StageThreads
from .worker import Done, Reporting, StageCall, execute, execute_dropped

__all__ = ["DROPPED", "Scheduler"]


class Scheduler:
    """One run's scheduling state. ``run()`` returns when the sources end, the frame limit is
    reached, a ``fail`` decision fires (``state.failure``) or a stage raises (``state.error``);
    ``state`` (a ``RunState``) also gets the frames completed and the timing origin."""

    def __init__(self, state, instances, knobs, admission=None):
        self.state = state
        self.stages = state.pipeline.ordered()
        self.instances = instances
        self.policy = state.policy
        self.recorder = state.recorder
        self.options = state.options
        self.clock = state.options.clock
        self.warn = state.warn
        self.knobs = knobs
        self.ancestors = ancestors(state.pipeline)
        self.sources = [s for s in self.stages if is_source(s)]
        self.workers = [s for s in self.stages if not is_source(s)]
        self.events: queue.Queue = queue.Queue()
        self.reporting = Reporting(self.events.put, self.clock, self.recorder)
        self.frames: dict[int, Frame] = {}
        self.next_frame = {s.id: 0 for s in self.workers}
        self.busy: set[str] = set()
        self.busy_since: dict[str, tuple[int, int]] = {}  # stage id -> (frame, start ns)
        self.admission = admission  # AdmissionControl or None (admit every frame)
        self.outcomes = StageOutcomes()  # applies deadline decisions, keeps reuse_last's outputs
        self.pending: dict[str, object] = {}
        self.admitted = 0
        self.ended = False
        self.stopping: str | None = None  # None | "fail" | "error"
        self.stop_at = float("inf")  # frames >= this index are not started (fail policy)
        self.sinks = {s.id for s in self.workers if s.op_cls is not None
                      and callable(getattr(s.op_cls, "process_dropped", None))}
        self.sink_stages = {s.id for s in self.workers if not s.output_specs}
        self.ts0_ns: int | None = None  # sensor time of frame 0 (pacing origin)
        self.pace0_ns = 0  # run-clock time frame 0 was released
        self.seen_ns = 0  # virtual clock: the latest time the scheduler has seen (see _now)

    # -- threads -------------------------------------------------------------------------
    def start(self) -> None:
        self.threads = StageThreads(self.sources, self.workers, self.instances, self.options,
                                    self.knobs, self.warn, lambda: self.events.put("wake"))
        self.readers, self.idle = self.threads.readers, self.threads.idle
        self.state.t0_ns = self.clock.now_ns()
        self.threads.start()

    def shutdown(self) -> None:
        self.state.live_skipped = self.threads.shutdown()

    # -- main loop -----------------------------------------------------------------------
    def run(self) -> None:
        while True:
            if not self.stopping:
                self._admit()
            completed = self.state.frames
            self._dispatch()
            if not self.busy and self._finished():
                return
            if self.state.frames == completed:  # else frames finished (skipped) while dispatching:
                self._wait()                 # admit again before blocking on events

    def _finished(self) -> bool:
        """Nothing left to do. After a ``fail`` decision or an error on frame k, the frames
        before k are still finished (their sinks write them) and no later frame starts, so what
        a stopped run leaves behind does not depend on thread timing."""
        if self.stopping:
            return not any(index < self.stop_at for index in self.frames)
        return self.ended and not self.frames

    def _wait(self) -> None:
        timeout = None
        target = self._pacing_target()
        if target is not None and not self.clock.virtual:
            timeout = max(0.0, (target - self.clock.now_ns()) / 1e9)
        elif target is not None and not self.busy:
            self.clock.sleep_until(target)
            return
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        if isinstance(event, Done):
            self._settle_done(event)

    def _now(self) -> int:
        """The run clock for decisions. A running stage moves a virtual clock at a moment thread
        timing decides, so while stages run the scheduler sees it only up to the results it has
        settled: pacing, admission and e2e decisions follow events, not thread interleaving."""
        if not self.clock.virtual:
            return self.clock.now_ns()
        if not self.busy:  # nothing runs: the clock stands still, reading it is deterministic
            self.seen_ns = max(self.seen_ns, self.clock.now_ns())
        return self.seen_ns

    # -- admission -------------------------------------------------------------------------
    def _limit_reached(self) -> bool:
        limit = self.options.frames
        return limit is not None and self.admitted >= limit

    def _admit(self) -> None:
        max_in_flight = self.options.max_in_flight or self.options.worker_count() + 2
        while not self.ended and self._in_flight() < max_in_flight:
            if self._limit_reached():
                self.ended = True
                return
            for sid, reader in self.readers.items():
                if sid not in self.pending:
                    try:
                        self.pending[sid] = self._next_read(reader)
                    except queue.Empty:
                        return
            if not self._admit_pending():
                return

    def _next_read(self, reader):
        """The reader's next ``Read`` (``queue.Empty``: none yet). A read takes no virtual time,
        so on a virtual clock the sample is waited for: when the reader thread runs decides
        nothing. Live input is never waited for."""
        if self.clock.virtual and not self.options.live:
            return reader.get()
        return reader.queue.get_nowait()

    def _in_flight(self) -> int:
        """Admitted frames not finished; shed ones only wait for the stages to pass them."""
        return sum(1 for frame in self.frames.values() if not frame.skipped)

    def _admit_pending(self) -> bool:
        reads = [self.pending[s.id] for s in self.sources]
        for stage, read in zip(self.sources, reads):
            if read.error is not None:
                self._abort(self._wrap(read.error, stage.id, self.admitted), self.admitted)
                return False
            if read.sample is END:
                self.ended = True
                return False
        target = self._pacing_target()
        if target is not None and self._now() < target:
            return False
        self.pending.clear()
        now = self._now()
        frame = self._new_frame(reads, target, now)
        if self.ts0_ns is None:
            self.ts0_ns, self.pace0_ns = frame.timestamp_ns, now
        skip = self._admission_decision(frame.index, frame.release_ns, now)
        self.frames[frame.index] = frame
        self.admitted += 1
        if self.idle is not None and skip is None:
            self.idle.clear()
        for stage, read in zip(self.sources, reads):
            timing = FrameTiming(frame.index, stage.id, read.start_ns, read.end_ns, read.cpu_ns,
                                 read.worker, read.tid)
            if skip is None:
                self._settle(frame, stage.id, read.sample.outputs, timing)
            else:  # shed: its sources' samples feed nothing, so no stage runs this frame
                self.recorder.add(timing.with_outcome("skipped"))
                self.drop(frame, stage.id, {"stage": None, "policy": "skip",
                                            "reason": "admission_skip"})
        if skip is not None:
            frame.skipped = frame.e2e_checked = True  # shed: not an e2e miss as well
            self.policy.note(skip)
            self._maybe_complete(frame)
        return True

    def _new_frame(self, reads: list, target: int | None, now: int) -> Frame:
        """The next frame from one ``Read`` per source; its sensor time is the first
        source's."""
        first = reads[0].sample
        if len(reads) == 1:
            stamps = dict(first.stamps)
        else:  # several sources: prefix each stream with its stage id
            stamps = {f"{s.id}/{k}": v for s, r in zip(self.sources, reads)
                      for k, v in r.sample.stamps.items()}
        # A paced frame "arrives" at its release time even when the pipeline was too busy to
        # take it then; a live one when it was read. End-to-end latency counts from there.
        arrival = target if target is not None else \
            min(now, max(r.end_ns for r in reads)) if self.options.live else now
        return Frame(self.admitted, first.timestamp_ns, stamps, arrival)

    def _admission_decision(self, index: int, arrival_ns: int, now_ns: int) -> dict | None:
        """The admission controller's skip decision for this frame (None: admit)."""
        if self.admission is None or not self.admission.enabled:
            return None
        in_flight = [(f.index, {sid: f.values.get(sid) is not None for sid in self.next_frame})
                     for f in sorted(self.frames.values(), key=lambda f: f.index)
                     if not f.skipped and f.index < self.stop_at]
        return self.admission.decide(index, arrival_ns, now_ns, in_flight,
                                     dict(self.busy_since), self.policy.variant)

    def _pacing_target(self) -> int | None:
        """Release time (run clock, ns) of the next frame under ``rate``, or None."""
        rate = self.options.rate
        if rate <= 0 or self.options.live or not self.pending or \
                len(self.pending) < len(self.readers):
            return None
        first = self.pending[self.sources[0].id]
        if first.sample is END or first.error is not None:
            return None
        if self.ts0_ns is None:
            return None  # the first frame goes now and fixes the time origin
        return self.pace0_ns + int((first.sample.timestamp_ns - self.ts0_ns) / rate)

    # -- dispatch ----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        progressed = True
        while progressed:
            progressed = False
            for stage in self.workers:
                frame = self.frames.get(self.next_frame[stage.id])
                if stage.id in self.busy or frame is None or frame.index >= self.stop_at:
                    continue
                values = [frame.values.get(ref.stage) for ref in stage.inputs.values()]
                if any(v is None for v in values):
                    continue  # an input is not ready yet
                if stage.id in self.sink_stages:
                    self._check_e2e_before_sinks(frame)
                if stage.id in frame.drops or any(v is DROPPED for v in values):
                    if stage.id in self.sinks:
                        upstream = self.ancestors[stage.id] | {stage.id}
                        self._submit(stage, frame, dropped=frame.first_drop(self.stages,
                                                                            upstream))
                    else:
                        self._skip(frame, stage.id)
                    progressed = True
                    continue
                self._submit(stage, frame)

    def drop(self, frame: Frame, stage_id: str, reason: dict) -> None:
        """A decision removes ``stage_id``'s value for ``frame`` (``Frame.drop``); ``reason``
        = ``{"stage", "policy", "reason"}``."""
        frame.drop(stage_id, reason)

    def _skip(self, frame: Frame, stage_id: str) -> None:
        """An input of this frame was dropped: the stage produces nothing for it."""
        self.next_frame[stage_id] += 1
        frame.skip(stage_id)
        self._maybe_complete(frame)

    def _check_e2e_before_sinks(self, frame: Frame) -> None:
        """Apply ``e2e_deadline_ms`` once per frame, when its first sink is ready: a frame
        already later than the deadline is dropped before any sink writes it (its lines say
        ``e2e_miss``). Measured, recorded and replayed like stage deadlines."""
        if frame.e2e_checked:
            return
        frame.e2e_checked = True
        elapsed = self._now() - frame.release_ns
        if self.policy.decide_e2e(frame.index, elapsed):
            frame.drop_sinks(self.sink_stages, {"stage": None, "policy": "drop",
                                                "reason": "e2e_miss"})

    def _submit(self, stage, frame: Frame, dropped: dict | None = None) -> None:
        """Run the stage on this frame on its thread; ``dropped``: call ``process_dropped``
        with that reason instead (a sink writing a dropped frame's line)."""
        inputs = {} if dropped is not None else \
            {port: frame.values[ref.stage][ref.port] for port, ref in stage.inputs.items()}
        info = FrameInfo(frame.index, frame.timestamp_ns, dict(frame.stamps),
                         frame.stale_seen_by(self.ancestors[stage.id]))
        variant = self.policy.variant(stage.id, frame.index)
        op = self.instances[stage.id].get(variant) or self.instances[stage.id]["normal"]
        call = StageCall(self.reporting, stage.id, op, info, inputs, variant,
                         stage.id in self.options.reference_stages, dropped)
        self.busy_since[stage.id] = (frame.index, self._now())
        self.busy.add(stage.id)
        self.threads.pool(stage.id).submit(execute if dropped is None else execute_dropped, call)

    # -- settling results ----------------------------------------------------------------------
    def _settle_done(self, done: Done) -> None:
        if done.timing is not None:
            self.seen_ns = max(self.seen_ns, done.timing.end_ns)
        self.busy.discard(done.stage)
        self.busy_since.pop(done.stage, None)
        self.next_frame[done.stage] += 1
        frame = self.frames[done.frame]
        if done.dropped and done.error is None:
            frame.skip(done.stage)  # a sink wrote the dropped frame's line: it holds nothing
            self._maybe_complete(frame)
            return
        problem = done.error or self._check_outputs(done.stage, done.outputs)
        if problem is not None:
            if done.timing is not None:
                self.recorder.add(done.timing)
            self._abort(self._wrap(problem, done.stage, done.frame), done.frame)
            return
        self._settle(frame, done.stage, done.outputs, done.timing)

    def _settle(self, frame: Frame, stage_id: str, outputs: dict, timing: FrameTiming) -> None:
        """Apply the deadline decision for this result and store the frame's value."""
        elapsed = timing.wall_ns
        action = self.policy.decide(stage_id, frame.index, elapsed, timing.variant,
                                    lambda: self._e2e_outlook(frame, stage_id))
        self.recorder.add(timing.with_outcome("ok" if action is None else f"miss:{action}"))
        if self.admission is not None:
            self.admission.observe(stage_id, timing.variant, elapsed)
        self.outcomes.apply(frame, stage_id, action, outputs)
        if action == "fail":
            stage = next(s for s in self.stages if s.id == stage_id)
            self.state.failure = {"frame": frame.index, "stage": stage_id, "op": stage.op,
                                  "elapsed_ms": round(elapsed / 1e6, 3),
                                  "deadline_ms": stage.deadline_ms}
            self.stopping = self.stopping or "fail"
            self.stop_at = min(self.stop_at, frame.index)
        self._maybe_complete(frame)

    def _e2e_outlook(self, frame: Frame, stage_id: str) -> int:
        """The frame's predicted end-to-end time (ns) when its first sink becomes ready, if
        ``stage_id``'s result is kept: time since arrival plus the predicted chain of non-sink
        stages after it (``AdmissionControl.downstream_ns``; 0 without a cost model)."""
        after = 0 if self.admission is None else self.admission.downstream_ns(
            stage_id, frame.index, self.policy.variant, self.sink_stages)
        return self._now() - frame.release_ns + after

    def _maybe_complete(self, frame: Frame) -> None:
        if len(frame.values) < len(self.stages):
            return
        end = self._now()
        if not frame.skipped:
            self.recorder.add_e2e(frame.index, frame.release_ns, end, frame.timestamp_ns)
        del self.frames[frame.index]
        self.state.frames += 1
        if self.idle is not None and not self.frames:
            self.idle.set()
        if self.options.progress is not None:
            self.options.progress(self.state.frames, self.options.frames or 0)

    def _check_outputs(self, stage_id: str, outputs) -> BaseException | None:
        return check_outputs(next(s for s in self.stages if s.id == stage_id), outputs)

    def _wrap(self, exc: BaseException, stage_id: str, frame: int) -> BaseException:
        return wrap_error(exc, next(s for s in self.stages if s.id == stage_id), frame)

    def _abort(self, error: BaseException, frame: int) -> None:
        """Stop after finishing the frames before ``frame``; the first error is the one raised."""
        if self.state.error is None:
            self.state.error = error
        self.stopping = "error"
        self.stop_at = min(self.stop_at, frame)
