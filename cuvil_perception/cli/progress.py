"""A one-line progress counter on stderr for verbs that work through frames (``make-drive``,
``eval``, ``quantize``): ``LABEL i/N`` rewritten in place while stderr is a terminal, cleared
when the work is done; off a terminal (a pipe, a log, CI) it prints nothing. ``run`` and
``bench`` draw a rich progress bar instead (`run_cmd`).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

import click


@contextmanager
def counter(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """Yield ``show(done, total)`` (total 0: unknown) drawing ``LABEL done/total`` on stderr,
    or None when stderr is not a terminal; the line is cleared on leaving."""
    if not sys.stderr.isatty():
        yield None
        return
    width = 0

    def show(done: int, total: int) -> None:
        nonlocal width
        text = f"{label} {done}/{total}" if total else f"{label} {done}"
        click.echo(f"\r{text:<{width}}", nl=False, err=True)  # pad over a longer earlier text
        width = max(width, len(text))

    try:
        yield show
    finally:
        if width:
            click.echo(f"\r{' ' * width}\r", nl=False, err=True)
