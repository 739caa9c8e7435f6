"""``cuvil-perception bench PIPELINE --replay DRIVE --budgets BUDGETS.yaml``: latency regression.

Runs the drive ``--repeat`` times (rate 0, deadlines measured but not enforced), prints the
per-stage timing table and the budget verdicts (stage, p50, p99, budget, verdict).

Exit codes: 0 every budget holds; 1 (``rt.BREACH_EXIT_CODE``) at least one budget is breached;
2 a usage error (bad budgets file, unknown stage, missing drive, ...).
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
@click.option("--budgets", "budgets_path", metavar="BUDGETS.yaml", required=True,
              help="Latency budgets (absolute ms or ratios to a reference).")
@click.option("--plot", "plot_dir", metavar="DIR",
              help="Write latency_histogram.png and timeline.png there.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the drive K times and pool the latencies.")
@click.option("--frames", type=click.IntRange(min=1), help="Frames per run.")
@click.option("--workers", type=click.IntRange(min=1), help="Compute threads [default: cores].")
@click.option("--overwrite", is_flag=True,
              help="Let --plot be a non-empty folder cuvil-perception did not fill.")
def bench_cmd(pipeline, replay, sets, budgets_path, plot_dir, repeat, frames, workers,
              overwrite) -> None:
    """Run PIPELINE over a drive and check latency budgets.

    The pipeline's sinks write into a temporary folder (removed afterwards), never onto the
    pipeline's own outputs; no run record is written.

    Exit codes: 0 every budget holds; 1 a budget is breached (or a run failed); 2 a usage error
    (bad budgets file, unknown stage, missing drive).
    """
    from ..graph import apply_cli_sources, load_pipeline
    from ..rt import BREACH_EXIT_CODE, bench_pipeline, load_budgets, write_plots
    from ..rt.report import budget_table, timing_table

    console, errors = wide_console(), Console(stderr=True)
    spec = load_budgets(budgets_path)
    if plot_dir:
        from ..rt import Claim, check_outputs

        inputs = [Claim("BUDGETS.yaml", Path(budgets_path))]
        if pipeline:
            inputs.append(Claim("the pipeline file", Path(pipeline)))
        check_outputs([Claim("--plot", Path(plot_dir), folder=True)], inputs,
                      overwrite=overwrite)

    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)

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
