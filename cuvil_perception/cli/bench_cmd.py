"""``cuvil-perception bench PIPELINE --replay DRIVE --budgets BUDGETS.yaml``: latency regression.

Runs the drive ``--repeat`` times (rate 0, deadlines measured but not enforced), prints the
per-stage timing table and the budget verdicts (stage, p50, p99, budget, verdict).

``bench PIPELINE --vs B.yaml`` (or ``--vs-set STAGE.PARAM=VALUE``, ``--vs-model STAGE=MODEL``):
the A/B board instead: both sides run interleaved, one table of both sides' p50/p99, frames/s
and RSS with B/A ratios (`rt.bench.compare_pipelines`, `rt.report.ab_table`).

Exit codes: 0 every budget holds (A/B: both sides ran); 1 (``rt.BREACH_EXIT_CODE``) at least
one budget is breached; 2 a usage error (bad budgets file, unknown stage, missing drive, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from .run_cmd import wide_console
from .set_option import set_option


@click.command("bench")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", metavar="DRIVE", help="Drive to replay [default: the YAML's].")
@set_option
@click.option("--budgets", "budgets_path", metavar="BUDGETS.yaml",
              help="Latency budgets (absolute ms or ratios to a reference); required unless "
                   "an A/B option (--vs, --vs-set, --vs-model) is given, refused with one.")
@click.option("--vs", "vs_path", metavar="B.yaml", type=click.Path(dir_okay=False),
              help="A/B: time B.yaml against PIPELINE (A), runs interleaved A, B, A, B...")
@click.option("--vs-set", "vs_sets", metavar="STAGE.PARAM=VALUE", multiple=True,
              help="A/B: B is B.yaml (default: PIPELINE) with this --set applied; repeatable.")
@click.option("--vs-model", "vs_models", metavar="STAGE=MODEL", multiple=True,
              help="A/B: B swaps STAGE's model (STAGE.model=MODEL, e.g. "
                   "yolo=builtin:yolov8_cuvil_demo.onnx); repeatable.")
@click.option("--plot", "plot_dir", metavar="DIR",
              help="Write latency_histogram.png and timeline.png there.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the drive K times and pool the latencies.")
@click.option("--frames", type=click.IntRange(min=1), help="Frames per run.")
@click.option("--workers", type=click.IntRange(min=1), help="Compute threads [default: cores].")
@click.option("--overwrite", is_flag=True,
              help="Let --plot be a non-empty folder cuvil-perception did not fill.")
def bench_cmd(pipeline, replay, sets, budgets_path, vs_path, vs_sets, vs_models, plot_dir,
              repeat, frames, workers, overwrite) -> None:
    """Run PIPELINE over a drive and check latency budgets.

    The pipeline's sinks write into a temporary folder (removed afterwards), never onto the
    pipeline's own outputs; no run record is written.

    With --vs / --vs-set / --vs-model it is an A/B comparison instead: PIPELINE (A) and B
    run interleaved --repeat times each, and one table gives both sides' per-stage and e2e
    p50/p99, frames/s and peak RSS with B/A ratios (no budgets).

    Exit codes: 0 every budget holds (A/B: both sides ran); 1 a budget is breached (or a run
    failed); 2 a usage error (bad budgets file, unknown stage, missing drive).
    """
    from ..errors import UsageError

    if vs_path or vs_sets or vs_models:
        if budgets_path:
            raise UsageError("--budgets checks one pipeline: give it without --vs / --vs-set / "
                             "--vs-model (run bench on A alone for its budgets)")
        return _ab_bench(pipeline, replay, sets, vs_path, vs_sets, vs_models, plot_dir, repeat,
                         frames, workers, overwrite)
    if not budgets_path:
        raise UsageError("bench needs --budgets BUDGETS.yaml (or --vs B.yaml / --vs-set / "
                         "--vs-model for an A/B comparison)")
    from ..graph import apply_cli_sources, load_pipeline
    from ..rt import BREACH_EXIT_CODE, bench_pipeline, load_budgets, write_plots
    from ..rt.report import budget_table, timing_table

    console, errors = wide_console(), Console(stderr=True)
    spec = load_budgets(budgets_path)
    if plot_dir:
        _check_plot_dir(plot_dir, [("BUDGETS.yaml", budgets_path), ("the pipeline file", pipeline)],
                        overwrite)
    warn = _warner(errors)

    loaded = apply_cli_sources(load_pipeline(pipeline, validate=False), replay=replay, sets=sets)
    result = bench_pipeline(loaded.validate(), spec, frames=frames or spec.frames,
                            repeat=repeat, workers=workers, warn=warn)
    runs = len(result.runs)
    frames_total = sum(r.frames for r in result.runs)  # both runs of a repeat with references
    console.print(f"{runs} run(s), {frames_total} frames", highlight=False, soft_wrap=True)
    console.print(timing_table(result.report))
    if result.reference_report is not None:
        console.print(timing_table(result.reference_report,
                                   "the same stages with their references timed (ms)"))
    console.print(budget_table(result))
    if plot_dir:
        for path in write_plots(plot_dir, result.recorder, result.report,
                                result.runs[0].recorder):
            console.print(f"  plot {path}", highlight=False, soft_wrap=True)
    if not result.passed:
        breached = sum(1 for v in result.verdicts if not v.passed)
        errors.print(f"[bold red]{breached} budget(s) breached[/bold red]", highlight=False,
                     soft_wrap=True)
        sys.exit(BREACH_EXIT_CODE)
    console.print("all budgets hold", highlight=False, soft_wrap=True)


def _check_plot_dir(plot_dir, inputs, overwrite) -> None:
    """--plot must not clobber an input nor a folder cuvil-perception did not fill."""
    from ..rt import Claim, check_outputs

    claims = [Claim(name, Path(path)) for name, path in inputs if path]
    check_outputs([Claim("--plot", Path(plot_dir), folder=True)], claims, overwrite=overwrite)


def _warner(errors: Console):
    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
    return warn


def _ab_bench(pipeline, replay, sets, vs_path, vs_sets, vs_models, plot_dir, repeat, frames,
              workers, overwrite) -> None:
    """``bench A --vs B``: both sides interleaved, one A/B table, optionally the A/B plot."""
    from ..errors import PipelineError, UsageError
    from ..graph import apply_cli_sources, load_pipeline, preflight
    from ..rt import compare_pipelines, write_ab_plot
    from ..rt.report import ab_table

    console, errors = wide_console(), Console(stderr=True)
    if plot_dir:
        _check_plot_dir(plot_dir, [("the pipeline file", pipeline), ("B.yaml", vs_path)],
                        overwrite)
    a = apply_cli_sources(load_pipeline(pipeline, validate=False), replay=replay, sets=sets)
    b = load_pipeline(vs_path or pipeline, validate=False)
    b_sets = tuple(sets) + tuple(vs_sets) + tuple(_model_sets(b, vs_models))
    preflight(a.validate())  # both sides' file checks before either runs
    try:  # B's errors name its overrides as --set STAGE.PARAM: say they are B's
        preflight(apply_cli_sources(b, replay=replay, sets=b_sets).validate())
    except (UsageError, PipelineError) as e:
        raise UsageError(f"B (--vs / --vs-set / --vs-model): {e}") from None
    labels = (Path(pipeline).name, _b_label(pipeline, vs_path, vs_sets, vs_models))
    side_a, side_b = compare_pipelines(a, b, frames=frames, repeat=repeat, workers=workers,
                                       warn=_warner(errors))
    console.print(f"{repeat} run(s) each, interleaved A, B; {side_a.frames} + {side_b.frames} "
                  "frames", highlight=False, soft_wrap=True)
    console.print(ab_table(side_a, side_b, labels))
    if plot_dir:
        path = write_ab_plot(plot_dir, side_a, side_b, labels)
        console.print(f"  plot {path}", highlight=False, soft_wrap=True)


def _model_sets(pipeline, vs_models) -> list[str]:
    """``STAGE=MODEL`` -> ``STAGE.model=MODEL``, the stage checked to exist and take a model."""
    from ..errors import UsageError
    from ..graph.op import suggest
    from ..graph.registry import lookup
    from ..graph.plugins import OpImportError

    out = []
    for text in vs_models:
        stage_id, sep, model = text.partition("=")
        stage_id = stage_id.strip()
        ids = [s.id for s in pipeline.stages]
        if not sep or not stage_id or not model.strip():
            raise UsageError(f"--vs-model {text!r}: expected STAGE=MODEL (e.g. "
                             "yolo=builtin:yolov8_cuvil_demo.onnx)")
        if stage_id not in ids:
            raise UsageError(f"--vs-model {stage_id}: the pipeline has no stage '{stage_id}'"
                             f"{suggest(stage_id, ids)} (stages: {', '.join(ids)})")
        op = pipeline.stage(stage_id).op
        try:
            cls = lookup(op, pipeline.base_dir) if isinstance(op, str) else None
        except OpImportError:  # a user op that fails to import: validate() reports it
            cls = None
        if cls is not None and "model" not in {p.name for p in cls.params}:
            raise UsageError(f"--vs-model {stage_id}: stage '{stage_id}' (op {op}) takes no "
                             "model")
        out.append(f"{stage_id}.model={model.strip()}")
    return out


def _b_label(pipeline, vs_path, vs_sets, vs_models) -> str:
    changes = list(vs_sets) + [f"{m} (model)" for m in vs_models]
    base = Path(vs_path or pipeline).name
    return base + (" with " + ", ".join(changes) if changes else "")
