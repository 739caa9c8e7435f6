"""``RunState``: one run as an executor builds it and as its result and record describe it.

Both executors fill one (``executor.run_pipeline`` through its ``Scheduler``, and
``sequential.run_sequential``): the pipeline and options, the recorder of every stage call, the
deadline policy, the prewarm rows and compile counters, the placement lines, the warnings, and
how the frames went (frames completed, the timing origin, wall time, a stage's error or an
``on_miss: fail`` decision, Ctrl-C or SIGTERM). ``result()`` makes the ``RunResult`` of it and
``record_build.build_record`` the run record, so what a run reports and what it records come
from one object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import OutputWriteError
from .lifecycle import sink_outputs
from .options import RunOptions, RunResult
from .stats import LatencyRecorder
from .trace import write_trace


@dataclass
class RunState:
    """What one run built and how it went (see the module docstring)."""

    pipeline: Any  # the validated graph.Pipeline
    options: RunOptions  # the run's own copy, its clock set
    policy: Any = None  # the DeadlinePolicy; None for the sequential executor (no deadlines)
    recorder: LatencyRecorder = field(default_factory=LatencyRecorder)
    warnings: list[str] = field(default_factory=list)  # each distinct message once, in order
    prewarm: list[dict] = field(default_factory=list)  # the prewarm table rows
    compile: dict = field(default_factory=dict)  # {"before_frame0", "after_run"}: counters
    placement: list[str] = field(default_factory=list)  # rt.placement lines
    threads: list[dict] = field(default_factory=list)  # rt.thread_ledger rows
    deadlines: dict = field(default_factory=dict)  # stage id -> deadlines.Deadline used
    frames: int = 0  # frames through the whole pipeline
    t0_ns: int = 0  # run-clock origin of the timings
    wall_s: float = 0.0  # admission of frame 0 to the end of the last
    live_skipped: int = 0  # live frames the sources dropped because the pipeline was behind
    error: BaseException | None = None  # the first stage error: the run stopped there
    failure: dict | None = None  # the on_miss: fail decision that stopped the run
    interrupted: bool = False  # Ctrl-C or SIGTERM
    stop_signal: str | None = None  # "SIGINT" or "SIGTERM" when interrupted

    def warn(self, message: str) -> None:
        """Keep ``message`` (once: threads repeat knob refusals) and pass it to ``options.warn``."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        if self.options.warn is not None:
            self.options.warn(message)

    def status(self) -> str:
        """How the run ended (the record's ``status``)."""
        if self.failure is not None or self.error is not None:
            return "failed"
        if self.interrupted:
            return "terminated" if self.stop_signal == "SIGTERM" else "interrupted"
        return "completed"

    def stopped(self) -> dict | None:
        """Why the run stopped before its sources ended (the record's ``stopped``), or None."""
        if self.failure is not None:
            return dict(self.failure, reason="on_miss: fail")
        if self.error is not None:
            return {"reason": f"{type(self.error).__name__}: {self.error}"}
        if self.interrupted:
            return {"reason": "terminated (SIGTERM)" if self.stop_signal == "SIGTERM"
                    else "interrupted (Ctrl-C)"}
        return None

    def compiles_after_frame0(self) -> int:
        if not self.compile:
            return 0
        return self.compile["after_run"]["compiles"] - self.compile["before_frame0"]["compiles"]

    def result(self) -> RunResult:
        """The ``RunResult`` of the finished run (writing the trace when ``options.trace``);
        the latency report's warnings join the run's."""
        stages = self.pipeline.ordered()
        # tag checks need a whole run: a run stopped by an error has partial, misleading ratios
        report = self.recorder.report(stages, self.pipeline.e2e_deadline_ms,
                                      check_tags=not getattr(self.options.clock, "virtual", False)
                                      and self.error is None)
        for message in report.warnings:
            self.warn(message)
        compiles = self.compiles_after_frame0()
        if compiles:
            self.warnings.append(f"{compiles} kernel(s) compiled after prewarm (in open() or a "
                                 "frame): an op calls get_kernel for a spec its kernels() does "
                                 "not declare")
        policy = self.policy
        result = RunResult(frames=self.frames, wall_s=self.wall_s, report=report,
                           outputs=sink_outputs(self.pipeline), prewarm=self.prewarm,
                           compiles_after_frame0=compiles,
                           decisions=[] if policy is None else list(policy.decisions),
                           actions={} if policy is None else policy.counts(),
                           warnings=self.warnings, recorder=self.recorder, t0_ns=self.t0_ns,
                           interrupted=self.interrupted, stop_signal=self.stop_signal,
                           placement=list(self.placement),
                           deadlines={sid: d.as_dict() for sid, d in self.deadlines.items()})
        if self.options.trace is not None:
            try:
                result.trace_path = write_trace(self.options.trace, self.recorder.timings,
                                                {s.id: s.op for s in stages}, self.t0_ns)
            except OutputWriteError as exc:
                if self.error is None:
                    raise
                self.warn(str(exc))  # the run's own error (often the same full disk) comes first
        return result
