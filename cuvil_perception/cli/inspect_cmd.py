"""``cuvil-perception inspect PIPELINE``: one row per stage with its static shapes and deadlines.

Before printing, it makes every check ``run`` makes before opening a stage (the YAML and its
params, the ``rt:`` knobs, a source stage, model files, the drive's index: `graph.preflight`;
the output-path policy with ``run``'s default options; every kernel's source, rendered unless
the disk cache holds it: `compile.registry.check_source`), so a pipeline ``run`` would refuse
gets the same one-line error and exit 2 here.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..compile.registry import check_source
from ..graph import Pipeline, apply_cli_sources, load_pipeline, preflight
from ..rt import RunOptions
from ..rt.knobs import parse_knobs
from ..rt.run_files import plan
from .compile_cmd import pipeline_kernels
from .set_option import set_option


@click.command("inspect")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", "replay", metavar="DRIVE", help="Inspect with this drive as the source.")
@click.option("--camera", "camera", metavar="DEV", help="Inspect with a camera as the source.")
@set_option
@click.option("--profile", is_flag=True,
              help="Also run it (deadlines not enforced, sinks write to a temporary folder) and "
                   "check every stage's io/compute tag against its measured cpu/wall ratio.")
@click.option("--frames", type=click.IntRange(min=1), default=20, show_default=True,
              help="Frames to run with --profile.")
def inspect_cmd(pipeline: str, replay: str | None, camera: str | None, sets: tuple[str, ...],
                profile: bool, frames: int) -> None:
    """Validate PIPELINE and print its stages: op, tag, inputs, output shapes, deadlines."""
    p = load_pipeline(pipeline, validate=False)
    apply_cli_sources(p, replay=replay, camera=camera, sets=sets)
    p.validate()
    parse_knobs(p)
    preflight(p)
    plan(p, RunOptions())  # the output-path policy run applies (checks only, writes nothing)
    for spec in pipeline_kernels(p):  # a kernel that does not compile fails here as in run
        check_source(spec)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    console.print(stage_table(p))
    if p.overrides:
        console.print(f"--set: {', '.join(p.overrides)}", highlight=False, soft_wrap=True)
    for stage, line in stage_notes(p):
        console.print(f"{stage}: {line}", highlight=False, soft_wrap=True)
    if profile:
        _profile(console, p, frames, live=camera is not None)


def _profile(console: Console, p: Pipeline, frames: int, live: bool) -> None:
    """Run a few frames and print cpu/wall per stage with a verdict on its tag."""
    from ..rt import RunOptions, run_pipeline

    with tempfile.TemporaryDirectory(prefix="cuvil-profile-") as scratch:
        _redirect_sinks(p, Path(scratch))
        result = run_pipeline(p, RunOptions(frames=frames, live=live, enforce_deadlines=False,
                                            write_record=False))
    table = Table(title=f"tag check over {result.frames} frames (cpu time / wall time)")
    for column in ("stage", "tag", "p50 ms", "cpu/wall", "verdict"):
        table.add_column(column)
    flagged = {w.split("'")[1]: w for w in result.report.warnings if w.startswith("stage '")}
    for row in result.report.rows:
        if row.stage not in p.order:
            continue
        ratio = "-" if row.cpu_wall is None else f"{row.cpu_wall:.2f}"
        verdict = "[yellow]mismatch[/yellow]" if row.stage in flagged else "ok"
        table.add_row(row.stage, row.tag, f"{row.p50:.3f}", ratio, verdict)
    console.print(table)
    for warning in result.report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)


def _redirect_sinks(p: Pipeline, scratch: Path) -> None:
    """Point every path-like param of the sinks into ``scratch`` so profiling writes nothing."""
    for stage in p.ordered():
        if stage.output_specs:
            continue
        for name, value in stage.resolved_params.items():
            if isinstance(value, Path):
                stage.resolved_params[name] = scratch / stage.id / value.name


def stage_notes(p: Pipeline) -> list[tuple[str, str]]:
    """(stage id, line) for every stage whose op has a ``describe()`` hook, in order."""
    notes = []
    for stage in p.ordered():
        describe = getattr(stage.op_cls, "describe", None)
        if callable(describe):
            notes += [(stage.id, line) for line in stage.make_op().describe()]
    return notes


def stage_table(p: Pipeline) -> Table:
    """A rich table of a validated pipeline's stages in execution order."""
    title = f"pipeline '{p.name}' ({len(p.stages)} stages"
    title += f", e2e deadline {p.e2e_deadline_ms:g} ms)" if p.e2e_deadline_ms else ")"
    table = Table(title=title)
    for column in ("stage", "op", "tag", "inputs", "outputs", "deadline", "on_miss"):
        table.add_column(column)
    for stage in p.ordered():
        inputs = "\n".join(f"{port} <- {ref}" for port, ref in stage.inputs.items()) or "-"
        outputs = "\n".join(f"{name}: {spec.describe()}"
                            for name, spec in stage.output_specs.items()) or "-"
        deadline = "-" if not stage.deadline_ms else "auto" if stage.auto_deadline else \
            f"{stage.deadline_ms:g} ms"
        on_miss = stage.on_miss if stage.deadline_ms else "-"
        if stage.degrade is not None and stage.deadline_ms:
            on_miss += f" ({stage.degrade.frames} frames: {stage.degrade.params})"
        table.add_row(stage.id, stage.op, stage.effective_tag, inputs, outputs, deadline, on_miss)
    return table
