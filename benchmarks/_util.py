"""Tiny shared helpers for the benchmark scripts: repeat-and-time, and a table printer."""

from __future__ import annotations

import sys

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class Timing:
    """Per-run wall time in milliseconds over ``runs`` runs."""

    best_ms: float
    median_ms: float
    runs: int

    def __str__(self) -> str:
        return f"{self.median_ms:.3f} ms (best {self.best_ms:.3f})"


def measure(fn: Callable[[], object], runs: int = 5, number: int = 1,
            setup: Callable[[], object] | None = None) -> Timing:
    """Time ``fn`` ``runs`` times; each run calls it ``number`` times and reports the mean per
    call. ``setup`` (untimed) runs before every run."""
    samples = []
    for _ in range(runs):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) * 1e3 / number)
    return Timing(min(samples), statistics.median(samples), runs)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a table (rich if available, else aligned plain text)."""
    cells = [[_fmt(c) for c in row] for row in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(columns)]
        print(title)
        for row in [list(columns), *cells]:
            print("  ".join(c.rjust(w) if i else c.ljust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
        return
    table = Table(title=title)
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in cells:
        table.add_row(*row)
    # Piped into a file or a CI log, rich would squeeze the table into 80 columns.
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
