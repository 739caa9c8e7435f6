"""Terminal tables for ``run`` and ``bench`` (rich), built from a ``LatencyReport``."""

from __future__ import annotations

from rich.table import Table

from .bench import BudgetReport
from .stats import LatencyReport


def _ms(value: float) -> str:
    return f"{value:.3f}"


def timing_table(report: LatencyReport, title: str = "per-stage timing (ms)") -> Table:
    """Columns: stage, op, tag, frames, p50, p90, p99, max, cpu/wall, misses."""
    table = Table(title=title, title_justify="left")
    for name in ("stage", "op", "tag"):
        table.add_column(name)
    for name in ("frames", "p50", "p90", "p99", "max", "cpu/wall", "misses"):
        table.add_column(name, justify="right")
    for row in report.rows:
        ratio = "" if row.cpu_wall is None else f"{row.cpu_wall:.2f}"
        misses = "" if row.deadline_ms is None else f"{row.misses} (>{row.deadline_ms:g})"
        table.add_row(row.stage, row.op, row.tag, str(row.frames), _ms(row.p50), _ms(row.p90),
                      _ms(row.p99), _ms(row.max), ratio, misses)
    return table


def budget_table(result: BudgetReport) -> Table:
    """Columns: stage, p50, p99, budget, verdict."""
    table = Table(title="latency budgets", title_justify="left")
    table.add_column("stage")
    table.add_column("p50 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    table.add_column("budget")
    table.add_column("verdict")
    for verdict in result.verdicts:
        mark = "[green]pass[/green]" if verdict.passed else "[bold red]BREACH[/bold red]"
        table.add_row(verdict.budget.stage, _ms(verdict.p50), _ms(verdict.p99),
                      verdict.budget_text(), mark)
    return table
