"""The real-time executor: deadlines, run records, traces and latency budgets.

Run a validated pipeline::

    from cuvil_perception.rt import RunOptions, run_pipeline
    result = run_pipeline(pipeline, RunOptions(workers=2, rate=0, trace="trace.json"))
    result.report.row("bev").p99      # ms

What the executor expects of ops beyond ``graph.op`` (both optional):

* ``reference_process(inputs, frame) -> dict``: the op's numpy twin (same semantics); timed
  after ``process()`` on the same inputs when a budget compares a stage with its reference.
* ``reuses_output_buffers = True`` (class attribute): ``process()`` returns persistent buffers
  it overwrites on the next frame; the executor copies them (frames overlap stage by stage).
* sinks: ``process_dropped(frame, reason)`` writes a frame a decision dropped (one line per
  frame); ``folder_params = ("dir",)`` names params that are output folders (output policy).

Modules: ``executor`` (run_pipeline), ``scheduler`` (threads and frame order), ``frame_values``
(what a frame in flight holds: drops, reuse_last's stale values), ``policy``
(deadline decisions), ``admission`` (overload shed at admission), ``placement`` (intra-op
threads per network, the placement lines ``run`` prints), ``read_ahead`` (source read-ahead),
``stats`` (latency recorder), ``record`` (run records; ``run_files``: a run's inputs/outputs
and its record over the run's life), ``output_policy`` (where a command may write),
``signals`` (SIGTERM), ``trace`` (Perfetto JSON), ``knobs`` (rt: block), ``op_prewarm`` (the
ops' kernels before frame 0), ``sequential`` (the simple reference executor), ``budgets`` +
``bench`` (latency regression), ``plot`` (PNG plots), ``pytest_plugin`` (``--cuvil-budgets``).
"""

from .admission import AdmissionControl
from .bench import (BREACH_EXIT_CODE, BudgetReport, Side, Verdict, bench_pipeline,
                    compare_pipelines, evaluate)
from .budgets import Budget, BudgetFileError, BudgetSpec, load_budgets, parse_budgets
from .clock import MonotonicClock
from .executor import run_pipeline
from .knobs import RtKnobs, parse_knobs
from .metrics import RunMetrics
from .metrics_server import MetricsServer
from .options import RunOptions, RunResult
from .output_policy import Claim, check_outputs
from .placement import intra_op_threads, placement_lines, usable_cores
from .plot import write_ab_plot, write_plots
from .policy import ACTIONS, DeadlinePolicy
from .record import read_record, record_status
from .sequential import run_sequential
from .stats import LatencyRecorder, LatencyReport, StageStats
from .trace import write_trace

__all__ = [
    "ACTIONS", "AdmissionControl", "BREACH_EXIT_CODE", "Budget", "BudgetFileError", "BudgetReport", "BudgetSpec",
    "Claim", "check_outputs", "record_status",
    "DeadlinePolicy", "LatencyRecorder", "LatencyReport", "MetricsServer", "MonotonicClock",
    "RtKnobs", "RunMetrics",
    "RunOptions", "RunResult", "Side", "StageStats", "Verdict", "bench_pipeline",
    "compare_pipelines", "evaluate",
    "load_budgets", "parse_budgets", "parse_knobs", "read_record", "run_pipeline",
    "run_sequential", "write_ab_plot", "write_plots", "write_trace", "intra_op_threads", "placement_lines",
    "usable_cores",
]
