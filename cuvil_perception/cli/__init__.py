"""The ``cuvil-perception`` command line: one module per verb (``<verb>_cmd.py``), gathered in
``app``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. The verbs load here (~0.5 s: numpy, OpenCV, llvmlite), so a
    Ctrl-C while they load is the one-line exit 130 too, not an import traceback."""
    try:
        from .app import main as run_cli
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (SIGINT): stopped before any frame was written\n")
        sys.exit(130)
    run_cli(argv)


__all__ = ["main"]
