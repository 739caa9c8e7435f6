"""The fleet report as JSON (``OUT/report.json``, format ``cuvil-fleet-report/1``).

::

    {"format", "mode", "pipeline", "interpolation", "exit_code", "backend", "wall_s",
     "drives": {"total", "ok", "failed", "unfinished", "resumed"},
     "pooled": {"scores": [eval stage scores], "latency": [rt latency rows],
                "budgets": [verdicts]},
     "per_drive": [{"name", "drive", "status", "error", "frames", "seconds", "where",
                    "attempts", "retries": [{"attempt", "node", "host", "error", "message"}],
                    "outputs", "scores", "latency", "budgets"}],     # failed drives first
     "nodes": [{"node", "host", "drives", "ok", "failed", "frames", "seconds",
                "retried_elsewhere"}],                                 # report.node_summary
     "worst": [{"stage", "budget", "breaches", "drives": [{"name", "value", "p50", "p99",
                                                          "passed"}]}],
     "prewarm": [{"where", "kernels", "compiled", "seconds", "version", "source", "package",
                  "unreadable": [drive indices], "lost", "error"}]}

Scores use the ``cuvil-eval/1`` per-stage layout (AP null when a class has no ground truth);
latency rows the ``rt`` layout (ms); a non-finite number is written as null.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..output_files import write_text_atomic
from .report import FleetReport, budget_label, failed_first, node_summary

FORMAT = "cuvil-fleet-report/1"


def report_dict(report: FleetReport, run=None, backend: str = "") -> dict:
    """``run``: the ``FleetRun`` (resumed count, prewarm rows, wall time) when there is one."""
    ok = sum(1 for d in report.drives if d.ok)
    return {
        "format": FORMAT, "mode": report.mode, "pipeline": report.pipeline,
        "interpolation": report.method, "exit_code": report.exit_code, "backend": backend,
        "wall_s": _num(run.wall_s) if run else None,
        "drives": {"total": len(report.drives) + report.unfinished, "ok": ok,
                   "failed": len(report.failed), "unfinished": report.unfinished,
                   "resumed": run.resumed if run else 0},
        "pooled": {"scores": [s.as_dict() for s in report.pooled_scores],
                   "latency": _latency(report.pooled_latency),
                   "budgets": [verdict_dict(v) for v in report.verdicts]},
        "per_drive": [_drive(d) for d in failed_first(report.drives)],
        "nodes": [dict(n, seconds=_num(n["seconds"])) for n in node_summary(report.drives)],
        "worst": [{"stage": w["budget"].stage, "budget": budget_label(w["budget"]), "breaches":
                   w["breaches"], "drives": [dict(verdict_dict(v), name=name)
                                             for name, v in w["drives"]]}
                  for w in report.worst],
        "prewarm": run.prewarm if run else [],
    }


def _drive(drive) -> dict:
    row = drive.row
    return {"name": row["name"], "drive": row["drive"], "status": row["status"],
            "error": row.get("error"), "frames": row.get("frames"),
            "seconds": row.get("seconds"), "where": row.get("where"),
            "attempts": len(row.get("attempts", [])) or None, "resumed": row.get("resumed",
                                                                               False),
            "retries": [_attempt(a) for a in row.get("attempts", [])[:-1]],
            "outputs": row.get("outputs", []),
            "scores": [s.as_dict() for s in drive.scores],
            "latency": _latency(drive.latency),
            "budgets": [verdict_dict(v) for v in drive.verdicts]}


def _attempt(attempt: dict) -> dict:
    """A failed attempt that ran again: where, and why."""
    where = attempt.get("where") or {}
    error = attempt.get("error") or {}
    return {"attempt": attempt.get("attempt"), "node": where.get("node"),
            "host": where.get("host"), "error": error.get("type"),
            "message": error.get("message")}


def _latency(table) -> list[dict]:
    if table is None:
        return []
    return [{k: _num(v) if isinstance(v, float) else v for k, v in row.as_dict().items()}
            for row in table.rows]


def verdict_dict(verdict) -> dict:
    return {"stage": verdict.budget.stage, "budget": verdict.budget_text(),
            "p50_ms": _num(verdict.p50), "p99_ms": _num(verdict.p99),
            "value": _num(verdict.value), "allowed_ms": _num(verdict.allowed_ms),
            "passed": verdict.passed}


def _num(value):
    if value is None:
        return None
    value = float(value)
    return round(value, 6) if math.isfinite(value) else None


def write_json(path: Path, data: dict) -> Path:
    """Write atomically (temp + rename, see ``output_files.write_text_atomic``)."""
    return write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
