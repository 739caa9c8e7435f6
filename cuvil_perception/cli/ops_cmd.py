"""``cuvil-perception ops [NAME]``: the registered ops, or one op's tag, params and ports.

The tables come from the op classes themselves (their ``Param`` and ``PortSpec`` declarations), so
they are the reference for what a pipeline YAML may write.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from ..errors import UsageError
from ..graph import lookup, registered
from ..graph.op import suggest
from .op_reference import describe_ports, first_line, show_default


@click.command("ops")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True,
              help="Print the reference of every op as Markdown (the text of docs/ops.md).")
@click.option("--drive-formats", is_flag=True,
              help="Print the drive formats the replay and bag sources read, as the Markdown "
                   "table of docs/drive-format.md.")
def ops_cmd(name: str | None, markdown: bool, drive_formats: bool) -> None:
    """List the ops a pipeline can use, or describe op NAME (params, defaults, ports)."""
    if drive_formats:
        if name is not None or markdown:
            raise UsageError("--drive-formats prints the table of drive formats alone; leave out "
                             "NAME and --markdown")
        from ..drives.registry import formats_markdown

        click.echo(formats_markdown(), nl=False)
        return
    if markdown:
        if name is not None:
            raise UsageError("--markdown prints every op; leave out NAME")
        from .ops_markdown import ops_markdown

        click.echo(ops_markdown(), nl=False)
        return
    console = Console() if sys.stdout.isatty() else Console(width=140)
    if name is None:
        table = Table(title="ops (cuvil-perception ops NAME for params and ports)")
        for column in ("op", "tag", "what it does"):
            table.add_column(column)
        for op_name, cls in registered().items():
            if not op_name.startswith("test."):
                table.add_row(op_name, cls.tag, first_line(cls))
        console.print(table)
        return
    cls = lookup(name)
    if cls is None:
        raise UsageError(f"unknown op '{name}'{suggest(name, registered())}")
    console.print(f"[bold]{cls.name}[/bold] (default tag {cls.tag}): {first_line(cls)}",
                  highlight=False, soft_wrap=True)
    console.print(_params_table(cls))
    inputs, outputs, variadic = describe_ports(cls)
    console.print(_ports_table("inputs", inputs, variadic))
    console.print(_ports_table("outputs (with default params)", outputs, False))


def _params_table(cls) -> Table:
    table = Table(title="params")
    for column in ("param", "type", "default", "allowed", "meaning"):
        table.add_column(column)
    for param in cls.params:
        table.add_row(param.name, param.type_name(), show_default(param), param.constraint(),
                      param.doc)
    return table


def _ports_table(title: str, ports, variadic: bool) -> Table:
    table = Table(title=title)
    for column in ("port", "dtype and shape", "meaning"):
        table.add_column(column)
    if variadic:
        table.add_row("(any name)", "any", "every input is accepted and written")
    for spec in ports:
        table.add_row(spec.name, spec.describe(), spec.doc)
    return table
