"""The ``cuvil-perception`` command line: one module per verb, gathered in ``app``."""

from .app import main

__all__ = ["main"]
