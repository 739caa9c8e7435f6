"""What ``fleet`` shows on the terminal: progress while drives run, then the fleet report.

Progress goes to stderr: a bar with drives done / failed / ETA when stderr is a terminal, and
one line per finished drive and per retry in every case (so a log of a long fleet says which
drive ran where, on which attempt, and what was retried where).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from .run_cmd import wide_console

MAX_DRIVE_ROWS = 40  # longer fleets: the per-drive table is in report.json / report.html


class Display:
    """Context manager fed by ``run_fleet``'s ``on_start`` and ``on_row`` callbacks."""

    def __init__(self, mode: str, pipeline: str, backend):
        self.mode, self.pipeline, self.backend = mode, pipeline, backend
        self.backend_text = ""
        self.errors = Console(stderr=True)
        self.bar = None
        self.task = None
        self.total = self.done = self.failed = 0

    def __enter__(self):
        if self.errors.is_terminal:
            self.bar = Progress(TextColumn("drives"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("[red]{task.fields[failed]} failed"),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=self.errors, transient=True)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def start(self, total: int, resumed: int) -> None:
        self.total, self.done = total, resumed
        self.backend_text = self.backend.describe() if total > resumed else ""
        self._print(f"fleet {self.mode} of {self.pipeline}: {total} drive(s), {resumed} already "
                    f"done (--resume); {self.backend_text}")
        if self.bar is not None:
            self.task = self.bar.add_task("fleet", total=total - resumed, failed=0)

    def row(self, row: dict) -> None:
        self.done += 1
        place = place_text(row.get("where"))
        attempts = len(row.get("attempts", []))
        if row["status"] == "ok":
            text = (f"[{self.done}/{self.total}] {row['name']}: ok, {row.get('frames', 0)} "
                    f"frame(s) in {row['seconds']:.2f} s on {place}"
                    + (f" (attempt {attempts})" if attempts > 1 else ""))
        else:
            self.failed += 1
            error = row.get("error") or {}
            text = (f"[{self.done}/{self.total}] {row['name']}: [bold red]FAILED[/bold red] "
                    f"after {len(row.get('attempts', []))} attempt(s): {error.get('type')}: "
                    f"{error.get('message')}")
        self._print(text)
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed)

    def retry(self, task, outcome: dict) -> None:
        """A failed attempt that runs again (``task``: the next attempt)."""
        error = outcome.get("error") or {}
        how = "on another node" if task.avoid else "runs"
        if task.ship:
            how += ", with the drive's bytes"
        self._print(f"[yellow]retry[/yellow] {task.name}: attempt {task.attempt - 1} failed on "
                    f"{place_text(outcome.get('where'))}: {error.get('type')}: "
                    f"{error.get('message')}; attempt {task.attempt} {how}")

    def _print(self, text: str) -> None:
        console = self.bar.console if self.bar is not None else self.errors
        console.print(text, highlight=False, soft_wrap=True)


def place_text(where: dict | None) -> str:
    """``host:pid`` and, on Ray, ``node 1a2b3c4d``; ``an unknown node`` when it was lost."""
    where = where or {}
    if where.get("host") is None and where.get("node") is None:
        return "a lost worker"
    node = f" node {where['node'][:8]}" if where.get("node") else ""
    return f"{where.get('host')}:{where.get('pid')}{node}"


def print_report(report, run, paths) -> None:
    """Drives, pooled AP, pooled latency, budgets, worst drives, and where the files went."""
    from ..rt import BudgetReport
    from ..rt.report import budget_table, timing_table
    from .eval_cmd import score_table

    from ..fleet.report import node_summary

    console = wide_console()
    if report.drives and len(report.drives) <= MAX_DRIVE_ROWS:
        console.print(drive_table(report))
    nodes = node_summary(report.drives)
    if nodes:
        console.print(node_table(nodes))
    for drive in report.failed:
        error = drive.row.get("error") or {}
        console.print(f"[red]failed[/red] {drive.row['name']} ({drive.row['drive']}): "
                      f"{error.get('type')}: {error.get('message')}", highlight=False,
                      soft_wrap=True)
    ok = len(report.drives) - len(report.failed)
    if report.pooled_scores:
        console.print(f"AP pooled over {ok} drive(s)", highlight=False)
        console.print(score_table(SimpleNamespace(scores=report.pooled_scores)))
    if report.pooled_latency is not None:
        console.print(timing_table(report.pooled_latency,
                                   f"latency pooled over {ok} drive(s) (ms)"))
    if report.verdicts:
        console.print(budget_table(BudgetReport(report.verdicts, report.pooled_latency)))
        console.print(worst_table(report))
    summary = (f"{len(report.drives)} drive(s) finished ({run.resumed} resumed), "
               f"{len(report.failed)} failed, {report.unfinished} not run; "
               f"{run.wall_s:.1f} s")
    console.print(summary, highlight=False, soft_wrap=True)
    for path in paths:
        console.print(f"  report  {path}", highlight=False, soft_wrap=True)


def drive_table(report) -> Table:
    """One row per drive: status, frames, seconds, where, mAP per scored stage, e2e p99."""
    from ..fleet.report import failed_first

    table = Table(title="drives (failed first)", title_justify="left")
    for name in ("drive", "status", "frames", "s", "host:pid"):
        table.add_column(name, justify="left" if name in ("drive", "status", "host:pid")
                         else "right")
    columns = [(s.stage, s.metric) for s in report.pooled_scores]
    for stage, metric in columns:
        table.add_column(f"{stage} {metric.upper()} mAP", justify="right")
    table.add_column("e2e p99 ms", justify="right")
    for drive in failed_first(report.drives):
        row, where = drive.row, drive.row.get("where") or {}
        status = "ok" if drive.ok else "[bold red]failed[/bold red]"
        cells = [row["name"], status, str(row.get("frames") or 0), f"{row['seconds'] or 0:.2f}",
                 f"{where.get('host')}:{where.get('pid')}"]
        maps = {(s.stage, s.metric): s.mean_ap for s in drive.scores}
        cells += [_ap(maps.get(key, math.nan)) for key in columns]
        e2e = drive.latency.row("e2e").p99 if drive.latency is not None else None
        cells.append("" if e2e is None else f"{e2e:.3f}")
        table.add_row(*cells)
    return table


def node_table(nodes: list[dict]) -> Table:
    """One row per machine (Ray node, else host): drives finished there, retries from it."""
    table = Table(title="nodes", title_justify="left")
    for name in ("node", "host", "drives", "ok", "failed", "frames", "run s",
                 "retried elsewhere"):
        table.add_column(name, justify="left" if name in ("node", "host") else "right")
    for n in nodes:
        node = n["node"] if not n["host"] else n["node"][:16]
        table.add_row(node, str(n["host"] or ""), str(n["drives"]), str(n["ok"]),
                      str(n["failed"]), str(n["frames"]), f"{n['seconds']:.2f}",
                      str(n["retried_elsewhere"]))
    return table


def worst_table(report) -> Table:
    from ..fleet.report import budget_label

    table = Table(title="worst drives per budget", title_justify="left")
    for name in ("budget", "breaches", "drive", "measured", "verdict"):
        table.add_column(name, justify="right" if name in ("breaches", "measured") else "left")
    for worst in report.worst:
        for rank, (name, verdict) in enumerate(worst["drives"]):
            mark = "[green]pass[/green]" if verdict.passed else "[bold red]BREACH[/bold red]"
            first = rank == 0
            table.add_row(budget_label(worst["budget"]) if first else "",
                          str(worst["breaches"]) if first else "", name,
                          f"{verdict.value:.3f}", mark,
                          end_section=rank == len(worst["drives"]) - 1)
    return table


def _ap(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"
