"""``bench``: run a drive (``repeat`` times), merge the latencies, check them against budgets.

Runs use ``rate 0`` and no deadline enforcement (a policy would change what is measured: a
dropped frame has no downstream latency); misses are still counted in the table.

When a budget is relative to a reference implementation, each repeat is two runs: a clean run
(what absolute budgets and ``e2e`` are checked on) and a run that also times the references
right after their stage on every frame (``RunOptions.reference_stages``). Ratio budgets compare
the stage and its reference from that second run, frame by frame on the same inputs and under
the same machine load; the clean run keeps the references' time out of ``e2e``.

`compare_pipelines` is ``bench --vs``: two pipelines run interleaved (A, B, A, B, ...) with the
same run options, each side's timings pooled, with frames/s and per-run peak RSS (`Side`).

The pipeline's sinks still run (their cost is part of what is measured) but write into a
temporary folder removed afterwards, never onto the pipeline's own output files.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .budgets import Budget, BudgetSpec
from .deadlines import run_stages
from .options import RunOptions, RunResult
from .stats import LatencyRecorder, LatencyReport

BREACH_EXIT_CODE = 1  # `bench` exit code when a budget is breached (usage errors: 2)


@dataclass
class Verdict:
    """One budget line: the measured value against its limit (ms, or a ratio)."""

    budget: Budget
    p50: float
    p99: float
    value: float  # ms for absolute budgets, the measured ratio for relative ones
    allowed_ms: float  # the limit in ms (for a ratio: limit x the reference's metric)
    passed: bool

    def budget_text(self) -> str:
        b = self.budget
        if b.kind == "ms":
            return f"{b.metric} <= {b.limit:g} ms"
        return f"{b.metric} <= {b.limit:g} x {b.reference} ({self.allowed_ms:.3f} ms)"


@dataclass
class BudgetReport:
    """Verdicts plus what they were computed from: ``report`` (clean runs, raw timings in
    ``recorder``) and, when references were timed, ``reference_report`` (the runs that also
    timed them, raw timings in ``reference_recorder``)."""

    verdicts: list[Verdict]
    report: LatencyReport
    runs: list[RunResult] = field(default_factory=list)
    recorder: LatencyRecorder | None = None
    reference_report: LatencyReport | None = None
    reference_recorder: LatencyRecorder | None = None

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def text(self) -> str:
        """A plain-text table (stage, p50, p99, budget, verdict)."""
        lines = [f"{'stage':<20} {'p50 ms':>9} {'p99 ms':>9}  {'budget':<40} verdict"]
        for v in self.verdicts:
            lines.append(f"{v.budget.stage:<20} {v.p50:>9.3f} {v.p99:>9.3f}  "
                         f"{v.budget_text():<40} {'pass' if v.passed else 'BREACH'}")
        return "\n".join(lines)


def evaluate(spec: BudgetSpec, report: LatencyReport,
             reference_report: LatencyReport | None = None) -> list[Verdict]:
    """Absolute budgets on ``report``; ratio budgets on ``reference_report`` (else ``report``)."""
    verdicts = []
    for budget in spec.budgets:
        source = reference_report if budget.kind == "ratio" and reference_report else report
        row = source.row(budget.stage)
        measured = getattr(row, budget.metric)
        if budget.kind == "ms":
            allowed, value = budget.limit, measured
        else:
            reference = source.row(spec.reference_row(budget.reference))
            base = getattr(reference, budget.metric)
            allowed = budget.limit * base
            value = measured / base if base > 0 else float("inf")
        verdicts.append(Verdict(budget, row.p50, row.p99, value, allowed,
                                passed=measured <= allowed and row.frames > 0))
    return verdicts


def bench_pipeline(pipeline, spec: BudgetSpec, replay=None, frames=None, repeat: int = 1,
                   workers: int | None = None, warn=None, progress=None) -> BudgetReport:
    """Run ``pipeline`` (a validated ``Pipeline`` or a YAML path) and check ``spec``.

    ``replay`` overrides the drive of every ``replay`` stage (a path given, else the YAML's).
    """
    from .executor import run_pipeline

    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    pipeline = _load(pipeline, replay)
    spec.check_pipeline(pipeline)
    references = spec.reference_stages()
    clean, timed, runs = LatencyRecorder(), LatencyRecorder(), []
    with tempfile.TemporaryDirectory(prefix="cuvil-bench-") as scratch:
        _redirect_sinks(pipeline, Path(scratch))
        for _ in range(repeat):
            for reference_stages in ((), references) if references else ((),):
                # the sinks write into bench's own scratch folder: each run replaces the last
                # one's files, whatever a (user's) sink writes in them
                options = RunOptions(frames=frames, workers=workers, rate=0.0,
                                     enforce_deadlines=False, write_record=False, warn=warn,
                                     progress=progress, reference_stages=reference_stages,
                                     overwrite=True)
                result = run_pipeline(pipeline, options)
                runs.append(result)
                (timed if reference_stages else clean).merge(result.recorder)
    stages = run_stages(pipeline, runs[0])  # deadline_ms: auto as the first run resolved it
    report = clean.report(stages, pipeline.e2e_deadline_ms)
    reference_report = timed.report(stages, pipeline.e2e_deadline_ms) if references else None
    return BudgetReport(evaluate(spec, report, reference_report), report, runs, clean,
                        reference_report, timed if references else None)


def _redirect_sinks(pipeline, folder: Path) -> None:
    """Point every Path param of every sink into ``folder/<stage>/`` (then re-validate)."""
    from ..graph import Sink

    for stage in pipeline.ordered():
        if stage.op_cls is None or not issubclass(stage.op_cls, Sink):
            continue
        for name, value in stage.resolved_params.items():
            if isinstance(value, Path):
                stage.params[name] = str(folder / stage.id / (value.name or name))
    pipeline.validate()


def _load(pipeline, replay):
    from ..graph import Pipeline, apply_cli_sources, load_pipeline

    if pipeline is None:
        raise UsageError("no pipeline: pass one, or name it with 'pipeline:' in the budgets file")
    if isinstance(pipeline, Pipeline):
        if replay is not None:
            raise UsageError("pass replay= only with a pipeline path (a Pipeline object already "
                             "names its drive)")
        return copy.deepcopy(pipeline).validate()  # its sinks get redirected: keep the caller's
    loaded = load_pipeline(Path(pipeline), validate=False)
    if replay is not None:
        apply_cli_sources(loaded, replay=replay)
    return loaded.validate()


@dataclass
class Side:
    """One side of ``bench --vs``: its pooled timings and what its runs cost.

    frames: frames through the whole pipeline over all repeats; fps: those frames over the
    summed run wall time. peak_rss_mb: the largest per-run peak resident set (MiB) of this
    process, the peak (VmHWM) reset at each run's start; rss_growth_mb: the largest per-run
    rise of that peak above the RSS at the run's start, i.e. what the run added to what was
    already resident (interpreter, libraries). Both None where the kernel offers no reset."""

    report: LatencyReport
    recorder: LatencyRecorder
    runs: list[RunResult]
    peak_rss_mb: float | None
    rss_growth_mb: float | None

    @property
    def frames(self) -> int:
        return sum(r.frames for r in self.runs)

    @property
    def fps(self) -> float:
        wall = sum(r.wall_s for r in self.runs)
        return self.frames / wall if wall > 0 else 0.0


def compare_pipelines(a, b, frames=None, repeat: int = 1, workers: int | None = None,
                      warn=None, progress=None) -> tuple[Side, Side]:
    """Run validated pipelines ``a`` and ``b`` interleaved (A, B, A, B, ... ``repeat`` pairs,
    so both see the same machine load over time), after one untimed 1-frame warm-up run of
    each, and return their `Side` s."""
    from .executor import run_pipeline

    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    pipelines = [_load(a, None), _load(b, None)]
    recorders, runs = [LatencyRecorder(), LatencyRecorder()], [[], []]
    memory: list[list[tuple[float, float]]] = [[], []]  # per run: (peak, growth) MiB
    with tempfile.TemporaryDirectory(prefix="cuvil-bench-") as scratch:
        for i, pipeline in enumerate(pipelines):
            _redirect_sinks(pipeline, Path(scratch) / "AB"[i])
        # one untimed 1-frame run of each side first: the process's one-time costs (imports,
        # ONNX Runtime and kernel loading) would otherwise land on A's first run only
        for pipeline in pipelines:
            run_pipeline(pipeline, RunOptions(frames=1, workers=workers, rate=0.0,
                                              enforce_deadlines=False, write_record=False,
                                              warn=warn, overwrite=True))
        for _ in range(repeat):
            for i, pipeline in enumerate(pipelines):
                options = RunOptions(frames=frames, workers=workers, rate=0.0,
                                     enforce_deadlines=False, write_record=False, warn=warn,
                                     progress=progress, overwrite=True)
                start_mb = _reset_peak_rss()
                result = run_pipeline(pipeline, options)
                peak_mb = _status_mb("VmHWM")
                if start_mb is not None and peak_mb is not None:
                    memory[i].append((peak_mb, peak_mb - start_mb))
                runs[i].append(result)
                recorders[i].merge(result.recorder)
    sides = []
    for i, pipeline in enumerate(pipelines):
        stages = run_stages(pipeline, runs[i][0])
        report = recorders[i].report(stages, pipeline.e2e_deadline_ms)
        peak, growth = (max(m[0] for m in memory[i]), max(m[1] for m in memory[i])) \
            if len(memory[i]) == repeat else (None, None)
        sides.append(Side(report, recorders[i], runs[i], peak, growth))
    return sides[0], sides[1]


def _reset_peak_rss() -> float | None:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0:
    ``/proc/self/clear_refs`` 5) and return that RSS (MiB); None where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status_mb("VmRSS")


def _status_mb(field: str) -> float | None:
    """A ``kB`` field of /proc/self/status (VmHWM, VmRSS) in MiB, None if /proc gives none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None
