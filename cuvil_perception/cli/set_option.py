"""``--set STAGE.PARAM=VALUE`` (repeatable): override one value of the pipeline YAML from the
command line, on every verb that loads a pipeline (run, inspect, eval, bench, profile, compile,
fleet).

The option only collects the texts; `graph.overrides.apply_cli_sources(..., sets=...)` applies
and checks them (one mechanism for every CLI override of a pipeline).
"""

from __future__ import annotations

import click

HELP = ("Override a value of the pipeline YAML: a stage's param (yolo.conf=0.4, "
        "pillars.model=builtin:NAME, lists as [0, 1]) or its deadline_ms / on_miss / tag "
        "(yolo.deadline_ms=80), or e2e_deadline_ms=MS; VALUE is read as YAML and checked like "
        "the file's own; repeatable.")


def set_option(command):
    """The ``--set STAGE.PARAM=VALUE`` option, collected into the ``sets`` argument (a tuple)."""
    return click.option("--set", "sets", metavar="STAGE.PARAM=VALUE", multiple=True,
                        help=HELP)(command)
