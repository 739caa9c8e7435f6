"""``cuvil-perception ops [NAME]``: the registered ops, or one op's tag, params and ports.

The tables come from the op classes themselves (their ``Param`` and ``PortSpec`` declarations), so
they are the reference for what a pipeline YAML may write.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..errors import UsageError
from ..graph import lookup, registered
from ..graph.op import suggest
from ..graph.params import REQUIRED


@click.command("ops")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True,
              help="Print the reference of every op as Markdown (the text of docs/ops.md).")
def ops_cmd(name: str | None, markdown: bool) -> None:
    """List the ops a pipeline can use, or describe op NAME (params, defaults, ports)."""
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


def describe_ports(cls) -> tuple[tuple, tuple, bool]:
    """(input specs, output specs, variadic inputs) of ``cls`` with its default params."""
    op = cls({p.name: p.default for p in cls.params if not p.required}, {})
    return _safe(op.input_ports), _safe(op.output_ports), cls.variadic_inputs


def first_line(cls) -> str:
    """The first line of an op's doc (its one-line description)."""
    text = cls.doc or (cls.__doc__ or "").strip()
    return text.splitlines()[0] if text else ""


def _params_table(cls) -> Table:
    table = Table(title="params")
    for column in ("param", "type", "default", "allowed", "meaning"):
        table.add_column(column)
    for param in cls.params:
        table.add_row(param.name, param.type_name(), show_default(param), param.constraint(),
                      param.doc)
    return table


def show_default(param) -> str:
    """A default as the YAML would write it (a path as its text, not ``PosixPath(...)``)."""
    if param.default is REQUIRED:
        return "required"
    if param.default is None:
        return "null"
    if isinstance(param.default, bool):
        return "true" if param.default else "false"
    if isinstance(param.default, Path):
        return str(param.default)
    if isinstance(param.default, list):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else repr(v)
                               for v in param.default) + "]"
    return repr(param.default)


def _ports_table(title: str, ports, variadic: bool) -> Table:
    table = Table(title=title)
    for column in ("port", "dtype and shape", "meaning"):
        table.add_column(column)
    if variadic:
        table.add_row("(any name)", "any", "every input is accepted and written")
    for spec in ports:
        table.add_row(spec.name, spec.describe(), spec.doc)
    return table


def _safe(declare) -> tuple:
    """Ports that depend on params without a default (or on wiring) cannot be listed: none."""
    try:
        return tuple(declare())
    except (KeyError, TypeError, ValueError):
        return ()
