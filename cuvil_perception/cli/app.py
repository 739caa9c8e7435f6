"""The command group, and the one place where errors become exit codes.

User mistakes (``UsageError``) print one line on stderr and exit 2; a failed run
(``ExecutionError``) prints its report line and exits 1; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import click

from .. import __version__
from ..errors import CuvilError
from .finite import require_finite

# (module, attribute) of every verb; a module that is missing is skipped so partial installs work.
_COMMANDS = (
    ("run_cmd", "run_cmd"),
    ("inspect_cmd", "inspect_cmd"),
    ("ops_cmd", "ops_cmd"),
    ("make_drive_cmd", "make_drive_cmd"),
    ("compile_cmd", "compile_cmd"),
    ("cache_cmd", "cache_group"),
    ("bench_cmd", "bench_cmd"),
    ("eval_cmd", "eval_cmd"),
    ("quantize_cmd", "quantize_cmd"),
    ("render_cmd", "render_cmd"),
    ("bag_cmd", "bag_group"),
    ("convert_cmd", "convert_cmd"),
    ("rt_cmd", "rt_group"),
    ("fleet_cmd", "fleet_group"),
)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings (a rebuilt cache entry, ...) as one ``warning:`` line, without the
    source line Python's default format adds."""
    click.echo(f"warning: {message}", err=True)


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        from ..rt.signals import SIGINT_EXIT_CODE, SIGTERM_EXIT_CODE, RunTerminated

        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                return super().invoke(ctx)
        except CuvilError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:  # a signal before the run could stop cleanly
            terminated = isinstance(exc, RunTerminated)
            click.echo(f"{'terminated (SIGTERM)' if terminated else 'interrupted (SIGINT)'}: "
                       "stopped before any frame was written", err=True)
            sys.exit(SIGTERM_EXIT_CODE if terminated else SIGINT_EXIT_CODE)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuvil-perception")
def cli() -> None:
    """Run, inspect, compile and benchmark real-time perception pipelines."""


def _register() -> None:
    for module_name, attr in _COMMANDS:
        try:
            module = importlib.import_module(f".{module_name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(module_name):
                continue
            raise
        cli.add_command(getattr(module, attr))


_register()
require_finite(cli)  # no float option accepts nan or inf


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="cuvil-perception")
