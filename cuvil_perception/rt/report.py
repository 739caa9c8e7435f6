"""Terminal tables for ``run`` and ``bench`` (rich), built from a ``LatencyReport``."""

from __future__ import annotations

from rich.table import Table

from .bench import BudgetReport, Side
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


def _ratio(a: str, b: str) -> str:
    """B/A of two printed values (so the ratio matches the table); '-' if either is missing
    or A prints as 0."""
    try:
        base, value = float(a), float(b)
    except ValueError:
        return "-"
    return f"{value / base:.2f}" if base > 0 else "-"


def ab_table(a: Side, b: Side, labels: tuple[str, str] = ("A", "B")) -> Table:
    """``bench --vs``: one row per stage (the union of both sides', A's order first) and ``e2e``
    with p50 and p99 (ms) of A and B and B/A, then frames, frames/s, peak RSS and RSS growth
    (MiB, see `bench.Side`)."""
    table = Table(title=f"A/B: A = {labels[0]}, B = {labels[1]} (ms; B/A)", title_justify="left")
    table.add_column("stage")
    for name in ("A p50", "B p50", "B/A", "A p99", "B p99", "B/A"):
        table.add_column(name, justify="right")
    names = [r.stage for r in a.report.rows]
    names += [r.stage for r in b.report.rows if r.stage not in names]

    def cell(side: Side, stage: str, metric: str) -> str:
        has = side.report.has(stage) and side.report.row(stage).frames > 0
        return _ms(getattr(side.report.row(stage), metric)) if has else "-"

    for stage in names:
        p50 = cell(a, stage, "p50"), cell(b, stage, "p50")
        p99 = cell(a, stage, "p99"), cell(b, stage, "p99")
        table.add_row(stage, *p50, _ratio(*p50), *p99, _ratio(*p99),
                      end_section=stage == names[-1])
    def mib(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    for name, values in (("frames", (str(a.frames), str(b.frames))),
                         ("frames/s", (f"{a.fps:.2f}", f"{b.fps:.2f}")),
                         ("peak RSS MiB", (mib(a.peak_rss_mb), mib(b.peak_rss_mb))),
                         ("RSS growth MiB", (mib(a.rss_growth_mb), mib(b.rss_growth_mb)))):
        table.add_row(name, *values, _ratio(*values), "", "", "")
    return table
