"""The command group, and the one place where errors become exit codes.

User mistakes (``UsageError``, and click's own usage errors: an unknown option, a value out of
an option's range, a missing argument) print one line on stderr and exit 2; a failed run
(``ExecutionError``) prints its report line and exits 1; anything else is a bug and keeps its
traceback.

Verbs: every module ``cli/<verb>_cmd.py`` defines the click command ``<verb>`` and is added here
(`add_verbs`), so adding a verb is that module, its section of docs/cli.md and its test
(docs/extending.md).
"""

from __future__ import annotations

import errno
import importlib
import pkgutil
import sys
import warnings

import click

from .. import __version__
from ..errors import CuvilError
from .finite import require_finite


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings (a rebuilt cache entry, ...) as one ``warning:`` line, without the
    source line Python's default format adds."""
    click.echo(f"warning: {message}", err=True)


def one_line_usage_error(exc: click.UsageError) -> str:
    """click's usage error as one line (click itself prints the usage, a hint, then the
    error), pointing at the ``--help`` of the command it is about."""
    message = "; ".join(line.strip() for line in exc.format_message().splitlines() if line)
    where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
    return f"error: {message}{where}"


def symlink_loop(exc: BaseException) -> str | None:
    """The path of a symlink loop (a user's file-system mistake) that ``exc`` reports, else None:
    ``OSError`` ELOOP from opening it, or the ``RuntimeError`` pathlib's ``resolve()`` raises in
    its place (Python < 3.13), whose cause carries the path."""
    for error in (exc, exc.__context__):
        if isinstance(error, OSError) and error.errno == errno.ELOOP:
            return str(error.filename)
    return None


def _exit_with_one_line(exc: click.UsageError):
    click.echo(one_line_usage_error(exc), err=True)
    sys.exit(exc.exit_code)


class _Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:  # the group's own options (cuvil-perception --bogus)
            _exit_with_one_line(exc)

    def invoke(self, ctx: click.Context):
        from ..rt.signals import SIGINT_EXIT_CODE, SIGTERM_EXIT_CODE, RunTerminated

        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                return super().invoke(ctx)
        except CuvilError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group called alone prints its help
        except click.UsageError as exc:  # a verb's options or arguments
            _exit_with_one_line(exc)
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
                click.echo(f"error: {str(exc.filename)[:80]}...: a file name too long for the "
                           "file system (at most 255 bytes a name, 4096 a path)", err=True)
                sys.exit(2)
            path = symlink_loop(exc)
            if path is None:
                raise
            click.echo(f"error: {path}: a symlink loop (too many levels of symbolic links)",
                       err=True)
            sys.exit(2)
        except KeyboardInterrupt as exc:  # a signal before the run could stop cleanly
            terminated = isinstance(exc, RunTerminated)
            # only run's frames are known unwritten here; make-drive or convert may be half-way
            what = ": stopped before any frame was written" if ctx.invoked_subcommand == "run" \
                else ""
            click.echo(f"{'terminated (SIGTERM)' if terminated else 'interrupted (SIGINT)'}"
                       f"{what}", err=True)
            sys.exit(SIGTERM_EXIT_CODE if terminated else SIGINT_EXIT_CODE)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuvil-perception")
def cli() -> None:
    """Run, inspect, compile and benchmark real-time perception pipelines."""


VERB_MODULE_SUFFIX = "_cmd"


def verb_modules() -> list[str]:
    """The verbs' modules, sorted: every ``cli/<verb>_cmd.py`` (the folder is the one list of
    verbs; the package's other modules are helpers)."""
    folders = sys.modules[__package__].__path__
    return sorted(info.name for info in pkgutil.iter_modules(folders)
                  if info.name.endswith(VERB_MODULE_SUFFIX))


def verb_of(module) -> click.Command:
    """The click command ``<verb>`` that module ``cli/<verb>_cmd.py`` defines (``make_drive_cmd``
    defines ``make-drive``); a verb module without it is a bug and raises, naming the module."""
    verb = module.__name__.rsplit(".", 1)[-1][:-len(VERB_MODULE_SUFFIX)].replace("_", "-")
    found = [value for value in vars(module).values()
             if isinstance(value, click.Command) and value.name == verb]
    if len(found) != 1:
        raise TypeError(f"{module.__name__} must define exactly one click command named "
                        f"'{verb}' (found {len(found)})")
    return found[0]


def add_verbs(group: click.Group) -> None:
    """Import every verb module and add its command to ``group``. A module that fails to import
    is a broken install or a bug, and says so (its traceback)."""
    for module_name in verb_modules():
        group.add_command(verb_of(importlib.import_module(f".{module_name}", __package__)))
    require_finite(group)  # no float option accepts nan or inf


add_verbs(cli)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="cuvil-perception")
