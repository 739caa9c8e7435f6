"""The fleet report: per-drive and pooled detection quality, latency and budget verdicts.

Pooling is over the raw data, never over per-drive summaries:

- AP per class over all drives = ``eval.pool`` of the drives' matched detections and ground-truth
  counts, in fleet order — the AP one run over every frame of every drive would give;
- latency percentiles per stage over all drives = ``rt`` percentiles of every frame's sample of
  every drive (``fleet.latency``);
- budgets are checked on the pooled table and on each drive's own (``rt.bench.evaluate``); for
  each budget the drives are ranked by how close they come to (or how far past) the limit.

Exit codes (``exit_code``): 0 every drive ran and every budget holds; 1 a budget is breached
(pooled or on a drive); 3 a drive failed (wins over 1); the CLI adds 2 (usage) and 130 (Ctrl-C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..eval import ClassAP, StageScore, pool
from ..rt import BREACH_EXIT_CODE, Verdict, evaluate
from . import latency

FAILED_EXIT_CODE = 3
LOST = "a lost worker (node unknown)"
WORST = 5  # drives listed per budget


@dataclass
class DriveResult:
    """One drive as the report shows it: its row, scores, latency table and verdicts."""

    row: dict
    scores: list[StageScore] = field(default_factory=list)
    latency: object = None  # rt.LatencyReport
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.row["status"] == "ok"


@dataclass
class FleetReport:
    mode: str
    pipeline: str
    method: str
    drives: list[DriveResult]
    pooled_scores: list[StageScore] = field(default_factory=list)
    pooled_latency: object = None  # rt.LatencyReport over every drive's frames
    pooled_recorder: object = None  # rt.LatencyRecorder (for the histogram plot)
    verdicts: list[Verdict] = field(default_factory=list)  # budgets on the pooled table
    worst: list[dict] = field(default_factory=list)  # per budget: the drives ranked
    unfinished: int = 0  # drives not run (interrupted)

    @property
    def failed(self) -> list[DriveResult]:
        return [d for d in self.drives if not d.ok]

    @property
    def breached(self) -> bool:
        every = self.verdicts + [v for d in self.drives for v in d.verdicts]
        return any(not v.passed for v in every)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return FAILED_EXIT_CODE
        return BREACH_EXIT_CODE if self.breached else 0


def build_report(mode: str, pipeline: str, rows: list[dict], spec=None,
                 method: str = "all") -> FleetReport:
    """The report over ``rows`` (fleet order; None = not finished)."""
    drives = [_drive(row, spec, method) for row in rows if row is not None]
    report = FleetReport(mode, pipeline, method, drives,
                         unfinished=sum(1 for row in rows if row is None))
    ok = [d for d in drives if d.ok]
    report.pooled_scores = _pooled_scores(ok, method)
    samples = [d.row["latency"] for d in ok if d.row.get("latency")]
    if samples:
        report.pooled_latency = latency.report(samples)
        report.pooled_recorder = latency.recorder(samples)
        if spec is not None:
            refs = [d.row["reference_latency"] for d in ok if d.row.get("reference_latency")]
            report.verdicts = evaluate(spec, report.pooled_latency,
                                       latency.report(refs) if refs else None)
            report.worst = _worst(spec, ok)
    return report


def _drive(row: dict, spec, method: str) -> DriveResult:
    result = DriveResult(row)
    if row["status"] != "ok":
        return result
    result.scores = [_stage_score(s) for s in row.get("scores", [])]
    if row.get("latency"):
        result.latency = latency.report([row["latency"]])
        if spec is not None:
            ref = row.get("reference_latency")
            result.verdicts = evaluate(spec, result.latency, latency.report([ref]) if ref
                                       else None)
    return result


def node_summary(drives: list[DriveResult]) -> list[dict]:
    """One row per machine that ran an attempt (Ray node id, else host), in order of first use:
    ``{"node", "host", "drives", "ok", "failed", "frames", "seconds", "retried_elsewhere"}``:
    the drives that finished there, their frames and run seconds, and the attempts that failed
    there and ran again elsewhere (``node`` ``LOST`` when Ray could not say where: a task whose
    worker or node died)."""
    nodes: dict[str, dict] = {}
    for drive in drives:
        if drive.row.get("resumed"):
            continue
        attempts = drive.row.get("attempts") or []
        for number, attempt in enumerate(attempts, start=1):
            where = attempt.get("where") or {}
            key = where.get("node") or where.get("host") or LOST
            entry = nodes.setdefault(key, {"node": key, "host": where.get("host"), "drives": 0,
                                           "ok": 0, "failed": 0, "frames": 0, "seconds": 0.0,
                                           "retried_elsewhere": 0})
            if number < len(attempts):
                entry["retried_elsewhere"] += 1
                continue
            entry["drives"] += 1
            entry["ok" if drive.ok else "failed"] += 1
            entry["frames"] += drive.row.get("frames") or 0
            entry["seconds"] += attempt.get("seconds") or 0.0
    return list(nodes.values())


def failed_first(drives: list[DriveResult]) -> list[DriveResult]:
    """The drives with the failed ones first (each group in fleet order)."""
    return [d for d in drives if not d.ok] + [d for d in drives if d.ok]


def row_problem(row: dict) -> str | None:
    """What keeps the report from reading a finished drive's row (a hand-edited results file:
    a field missing, of another type), or None. Reads it exactly as `build_report` will."""
    if row.get("status") != "ok":
        return None
    try:
        if not isinstance(row.get("name"), str):
            raise TypeError("'name' is not a string")
        _drive(row, None, "all")
        for key in ("latency", "reference_latency"):
            if row.get(key):
                latency.recorder([row[key]])
                latency.stage_infos(row[key])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _stage_score(entry: dict) -> StageScore:
    classes = [ClassAP(c["class_id"], c["class"], math.nan if c["ap"] is None else c["ap"],
                       c["num_gt"], c["num_det"], c["tp"], np.asarray(c["scores"], np.float64),
                       np.frombuffer(c["hits"].encode(), np.uint8) == ord("1"))
               for c in entry["classes"]]
    return StageScore(entry["stage"], entry["op"], entry["metric"], classes)


def _pooled_scores(drives: list[DriveResult], method: str) -> list[StageScore]:
    if not drives:
        return []
    pooled = []
    for i, first in enumerate(drives[0].scores):
        per_class = []
        for k, _ in enumerate(first.classes):
            per_class.append(pool([d.scores[i].classes[k] for d in drives], method))
        pooled.append(StageScore(first.stage, first.op, first.metric, per_class))
    return pooled


def budget_label(budget) -> str:
    """``"e2e: p99 <= 40 ms"`` or ``"bev: p50 <= 0.5 x bev_numpy"`` (a ratio's limit in ms
    differs per drive, so the label gives the ratio)."""
    unit = "ms" if budget.kind == "ms" else f"x {budget.reference}"
    return f"{budget.stage}: {budget.metric} <= {budget.limit:g} {unit}"


def _worst(spec, drives: list[DriveResult]) -> list[dict]:
    """Per budget: the drives by measured value, highest first (``WORST`` of them)."""
    out = []
    for b, budget in enumerate(spec.budgets):
        ranked = sorted(((d.verdicts[b].value, d) for d in drives if d.verdicts),
                        key=lambda item: -item[0])
        out.append({"budget": budget, "breaches": sum(1 for _, d in ranked
                                                      if not d.verdicts[b].passed),
                    "drives": [(d.row["name"], d.verdicts[b]) for _, d in ranked[:WORST]]})
    return out
