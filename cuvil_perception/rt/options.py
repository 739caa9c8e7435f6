"""What a run is asked to do (``RunOptions``) and what it gives back (``RunResult``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .stats import LatencyRecorder, LatencyReport


@dataclass(frozen=True)
class RunOptions:
    """Options of ``run_pipeline``; the CLI flags of ``run`` map one to one. Frozen: a caller
    that adds something (a progress bar, a monitor) makes a copy with ``dataclasses.replace``,
    and the run never changes the options it was given.

    frames: stop after this many frames (None: until the sources end).
    workers: compute worker threads (default ``os.cpu_count()``).
    rate: replay pacing; 0 runs as fast as possible, 1.0 follows the recorded timestamps in real
        time, 2.0 twice as fast. Live input is never paced (the camera is the clock).
    live: camera input; the source keeps only its newest sample when the pipeline is behind.
    enforce_deadlines: apply ``on_miss`` policies and ``e2e_deadline_ms`` on misses. None (the
        default) = on for paced replays (``rate > 0``) and live input, off for ``rate 0``
        replays, which are then a pure function of the drive (misses still measured and counted).
    trace: write a Chrome/Perfetto trace JSON there.
    record: run-record path; None picks ``<first jsonl output>.record.json`` or
        ``runs/<pipeline>-<time>/record.json``; ``write_record=False`` writes none.
    decisions: a run record whose deadline decisions are re-applied instead of measured.
    clock: ``MonotonicClock()`` by default; ``testing.clock.FakeClock`` in tests.
    progress: called as ``progress(frames_done, frames_total_or_0)`` after each frame.
    warn: called with one line per warning (default: collected in ``RunResult.warnings`` only).
    note: called with one line of information that is not a warning (an op's
        ``RunContext.info``: a chosen bag topic, a server's address); default: dropped.
    reference_stages: stage ids whose op's ``reference_process`` is timed on the same inputs
        right after ``process`` (budgets relative to a numpy twin); results are discarded.
    max_in_flight: frames admitted but not finished (default ``workers + 2``).
    read_ahead: samples a replay source may read ahead of the pipeline at ``rate 0`` (paced
        replays read one sample ahead).
    shed: skip frames at admission when the measured stage costs say they cannot make their
        deadline (``rt.admission``); acts only with enforced deadlines at ``rate > 0`` or live.
    monitors: observers, each with ``attach(scheduler, recorder, policy, counters)``, called once
        before frame 0 (``counters``: the compile counters the record's ``compiles_after_frame0``
        counts from), and ``finish()`` once after the last frame, sinks closed (also when the
        run fails); each reads the run's state from its own thread (``rt.metrics.RunMetrics``,
        ``rt.otlp.OtlpExport``).
    overwrite: let outputs replace existing files and folders that cuvil-perception did not
        write (output-path rule ``not-ours``); inputs and the run's own outputs stay protected.
    deadline_cache: read and fill the per-machine cache of ``deadline_ms: auto`` values
        (``rt.deadline_cache``); False measures them in this run's warm-up and keeps nothing.
    extra_outputs / extra_inputs: ``output_policy.Claim``s the caller writes or reads besides
        the run's own (``run --viz DIR``, ``bench``'s budgets file), checked with them.
    """

    frames: int | None = None
    workers: int | None = None
    rate: float = 0.0
    live: bool = False
    enforce_deadlines: bool | None = None
    trace: str | Path | None = None
    record: str | Path | None = None
    write_record: bool = True
    decisions: str | Path | None = None
    clock: Any = None
    progress: Callable[[int, int], None] | None = None
    warn: Callable[[str], None] | None = None
    note: Callable[[str], None] | None = None
    reference_stages: tuple[str, ...] = ()
    max_in_flight: int | None = None
    read_ahead: int = 4
    shed: bool = True
    monitors: tuple = ()
    overwrite: bool = False
    deadline_cache: bool = True
    extra_outputs: tuple = ()
    extra_inputs: tuple = ()

    def worker_count(self) -> int:
        return max(1, self.workers if self.workers else (os.cpu_count() or 1))

    def deadlines_enforced(self) -> bool:
        """``enforce_deadlines``, or its default: paced replay and live on, ``rate 0`` off."""
        if self.enforce_deadlines is not None:
            return bool(self.enforce_deadlines)
        return self.live or self.rate > 0


@dataclass
class RunResult:
    """What a finished run reports.

    frames: frames that went through the whole pipeline; wall_s: admission of frame 0 to the end.
    outputs: ``[{"stage", "op", "param", "path"}]`` files and folders the sinks wrote.
    prewarm: the prewarm table rows; compiles_after_frame0 must be 0.
    decisions: every deadline decision (also in the record); actions: counts per action.
    deadlines: each stage deadline the run used, ``{stage id: {"ms", "source", ...}}``
        (``deadlines.Deadline.as_dict``; also in the record).
    recorder: the raw per-frame timings (also in the record), t0_ns their origin.
    """

    frames: int
    wall_s: float
    report: LatencyReport
    outputs: list[dict] = field(default_factory=list)
    prewarm: list[dict] = field(default_factory=list)
    compiles_after_frame0: int = 0
    decisions: list[dict] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    record_path: Path | None = None
    trace_path: Path | None = None
    warnings: list[str] = field(default_factory=list)
    recorder: LatencyRecorder | None = None  # the raw timings (plots, merged bench runs)
    t0_ns: int = 0  # run-clock origin of the timings
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (frames: what finished before)
    placement: list[str] = field(default_factory=list)  # rt.placement: header + one per stage
    deadlines: dict[str, dict] = field(default_factory=dict)  # stage id -> the record's entry
    stop_signal: str | None = None  # "SIGINT" or "SIGTERM" when interrupted

    def prewarm_summary(self) -> dict[str, int]:
        """``{"kernels", "hits", "misses"}`` over the prewarm rows."""
        hits = sum(1 for row in self.prewarm if row.get("hit"))
        return {"kernels": len(self.prewarm), "hits": hits, "misses": len(self.prewarm) - hits}
