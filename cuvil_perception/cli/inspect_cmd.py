"""``cuvil-perception inspect PIPELINE``: one row per stage with its static shapes and deadlines."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from ..graph import Pipeline, apply_cli_sources, load_pipeline


@click.command("inspect")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", "replay", metavar="DRIVE", help="Inspect with this drive as the source.")
@click.option("--camera", "camera", metavar="DEV", help="Inspect with a camera as the source.")
def inspect_cmd(pipeline: str, replay: str | None, camera: str | None) -> None:
    """Validate PIPELINE and print its stages: op, tag, inputs, output shapes, deadlines."""
    p = load_pipeline(pipeline, validate=False)
    apply_cli_sources(p, replay=replay, camera=camera)
    p.validate()
    Console().print(stage_table(p))


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
        deadline = f"{stage.deadline_ms:g} ms" if stage.deadline_ms else "-"
        on_miss = stage.on_miss if stage.deadline_ms else "-"
        if stage.degrade is not None and stage.deadline_ms:
            on_miss += f" ({stage.degrade.frames} frames: {stage.degrade.params})"
        table.add_row(stage.id, stage.op, stage.effective_tag, inputs, outputs, deadline, on_miss)
    return table
