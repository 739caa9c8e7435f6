"""``cuvil-perception eval PIPELINE --replay DRIVE [--out FILE.json]``: detection quality.

Runs PIPELINE over a labelled drive (deadlines measured, not enforced; the pipeline's own sinks
are left out) and scores every detector stage, found by its op's roles (`graph.roles`): 2D AP@IoU
per class for 2D detections (``yolo.detect``), rotated BEV AP for 3D boxes (``pillars.detect``),
both for fused objects (``fusion.associate``). Prints a table; ``--out`` writes
the same numbers as JSON (format ``cuvil-eval/1``). ``--compare-model STAGE=MODEL`` (repeatable)
evaluates twice — as configured, then with those stages' models swapped (an INT8 file from
``quantize``) — and prints both APs, their difference and the swapped stages' speed ratio side
by side (``--out``: format ``cuvil-eval-compare/1``). ``--out`` holds only what the input
decides (same input, same bytes); the measured stage times go beside it into
``timing_path(out)`` (format ``cuvil-eval-timing/1``). Exit codes: 0 done, 2 usage error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..output_files import write_text_atomic
from .progress import counter
from .set_option import set_option


@click.command("eval")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", metavar="DRIVE", help="Labelled drive to replay [default: the YAML's].")
@click.option("--out", metavar="FILE.json", help="Write the scores as JSON.")
@set_option
@click.option("--frames", type=click.IntRange(min=1), help="Score only the first N frames.")
@click.option("--iou", "iou_threshold", type=click.FloatRange(0.0, 1.0, min_open=True),
              default=0.5, show_default=True, help="IoU a detection needs to count as found.")
@click.option("--interpolation", type=click.Choice(["all", "r40"]), default="all",
              show_default=True,
              help="all = all-point (PASCAL VOC 2010+); r40 = KITTI's 40 recall points.")
@click.option("--min-height", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Ignore (don't-care) image boxes shorter than this many pixels.")
@click.option("--workers", type=click.IntRange(min=1), help="Compute threads [default: cores].")
@click.option("--overwrite", is_flag=True,
              help="Let --out replace an existing file cuvil-perception did not write.")
@click.option("--compare-model", "compare", metavar="STAGE=MODEL", multiple=True,
              help="Evaluate again with STAGE's model replaced (e.g. its INT8 file) and print "
                   "both, the AP difference and the stage's speed ratio; repeatable.")
def eval_cmd(pipeline, replay, out, sets, frames, iou_threshold, interpolation, min_height,
             workers, overwrite, compare) -> None:
    """Score the detector stages of PIPELINE against a drive's labels (AP per class)."""
    from ..eval import parse_swaps
    from ..graph import apply_cli_sources, load_pipeline
    from ..rt.output_lock import hold

    def load():
        return apply_cli_sources(load_pipeline(pipeline, validate=False), replay=replay,
                                 sets=sets)

    p = load()
    swaps = parse_swaps(compare, p)
    outputs = _check_out(p, Path(out), overwrite, swaps) if out else []
    errors = Console(stderr=True)

    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    options = dict(frames=frames, iou_threshold=iou_threshold, method=interpolation,
                   min_height=min_height, workers=workers, warn=warn)
    with hold(outputs):  # another eval writing the same --out: exit 2 naming its pid
        _evaluate(p, load, swaps, Path(out) if out else None, options)


def _evaluate(p, load, swaps: dict, out: Path | None, options: dict) -> None:
    """Score (or compare, with ``swaps``), print the table and write ``out``."""
    from ..eval import METHOD_NAMES, compare_models, evaluate_pipeline

    console = Console()
    title = f"AP@{options['iou_threshold']:g}, {METHOD_NAMES[options['method']]}"
    if swaps:
        with counter("eval, as configured then swapped: frame") as progress:
            comparison = compare_models(load, swaps, progress=progress, **options)
        report = comparison.base
        console.print(f"[bold]{report.pipeline}[/bold] on {report.drive}: {report.frames} "
                      f"frames, {title}", highlight=False)
        console.print(compare_table(comparison))
        if out:
            _write(console, out, comparison.as_dict(), comparison.timing_dict())
        return
    with counter("eval: frame") as progress:
        report = evaluate_pipeline(p, progress=progress, **options)
    console.print(f"[bold]{report.pipeline}[/bold] on {report.drive}: {report.frames} frames, "
                  f"{title}", highlight=False)
    console.print(score_table(report))
    if out:
        _write(console, out, report.as_dict(), report.timing_dict())


def timing_path(out: Path) -> Path:
    """Where ``eval --out OUT`` puts the measured times: ``OUT`` with ``.timing.json`` in
    place of its extension (scores.json -> scores.timing.json)."""
    return out.with_name(out.stem + ".timing.json") if out.suffix else \
        out.with_name(out.name + ".timing.json")


def _write(console, out: Path, scores: dict, timing: dict) -> None:
    """The scores at ``out``; the measured times (format ``cuvil-eval-timing/1``) beside it."""
    path = write_text_atomic(out, json.dumps(scores, indent=1) + "\n")
    timing = {"format": "cuvil-eval-timing/1", "scores": out.name,
              "measured": "wall times of this run (differ run to run)", **timing}
    times = write_text_atomic(timing_path(out), json.dumps(timing, indent=1) + "\n")
    console.print(f"  scores  {path}\n  timing  {times}", highlight=False)


def _check_out(pipeline, out: Path, overwrite: bool, swaps: dict) -> list:
    """The output-path policy for --out, before the (long) evaluation starts; the checked
    claims (the scores and their timing file), to lock for the evaluation's life."""
    from ..graph.roles import drive_param
    from ..rt import Claim, check_outputs

    inputs = [Claim("the pipeline file", Path(pipeline.source))]
    inputs += [Claim(f"--compare-model {stage}", model) for stage, model in swaps.items()]
    for stage in pipeline.stages:
        param = drive_param(stage.op)  # a drive folder, or a bag file (folder=True covers both)
        path = stage.params.get(param) if param else None
        if path:
            inputs.append(Claim(f"stage '{stage.id}' drive", Path(path), folder=True))
    outputs = [Claim("--out", out, kind="scores"),
               Claim("--out's timing file", timing_path(out), kind="scores")]
    check_outputs(outputs, inputs, overwrite=overwrite)
    return outputs


def score_table(report) -> Table:
    """One row per stage, metric and class: AP, ground truth, detections, true positives."""
    table = Table(title=None, show_lines=False)
    for name, justify in (("stage", "left"), ("metric", "left"), ("class", "left"),
                          ("AP", "right"), ("GT", "right"), ("det", "right"), ("TP", "right")):
        table.add_column(name, justify=justify)
    for score in report.scores:
        metric = "2D" if score.metric == "2d" else "BEV"
        for result in score.classes:
            table.add_row(score.stage, metric, result.name, _ap(result.ap), str(result.num_gt),
                          str(result.num_det), str(result.tp))
        table.add_row(score.stage, metric, "[bold]mean[/bold]", f"[bold]{_ap(score.mean_ap)}"
                      "[/bold]", "", "", "", end_section=True)
    return table


def compare_table(comparison) -> Table:
    """Per stage, metric and class: AP as configured, with the swapped models, difference;
    then each swapped stage's p50 time in both runs and the speed ratio."""
    table = Table(title=None, show_lines=False)
    swapped = ", ".join(f"{k}={v.name}" for k, v in comparison.swaps.items())
    for name, justify in (("stage", "left"), ("metric", "left"), ("class", "left"),
                          ("AP", "right"), (f"AP {swapped}", "right"), ("difference", "right")):
        table.add_column(name, justify=justify)
    for stage, metric, name, base, other, diff in comparison.rows():
        label = "2D" if metric == "2d" else "BEV"
        cells = (_ap(base), _ap(other), "n/a" if math.isnan(diff) else f"{diff:+.3f}")
        if name == "mean":
            cells = tuple(f"[bold]{c}[/bold]" for c in cells)
        table.add_row(stage, label, name, *cells, end_section=name == "mean")
    for stage, (base, other, ratio) in comparison.speed().items():
        table.add_row(stage, "speed", "p50 ms", f"{base:.1f}", f"{other:.1f}",
                      f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower")
    return table


def _ap(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"
