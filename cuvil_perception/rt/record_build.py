"""Assemble the run-record dict (format described in ``record``) from a finished run."""

from __future__ import annotations

from pathlib import Path

from .record import FORMAT, machine, pipeline_section, versions


def run_status(scheduler) -> str:
    """How the run ended (the record's ``status``)."""
    if scheduler.failure is not None or scheduler.error is not None:
        return "failed"
    if scheduler.interrupted:
        return "terminated" if scheduler.stop_signal == "SIGTERM" else "interrupted"
    return "completed"


def build_record(pipeline, options, scheduler, policy, recorder, result, counters) -> dict:
    before, after = counters["before_frame0"], counters["after_run"]
    stopped = None
    if scheduler.failure is not None:
        stopped = dict(scheduler.failure, reason="on_miss: fail")
    elif scheduler.error is not None:
        stopped = {"reason": f"{type(scheduler.error).__name__}: {scheduler.error}"}
    elif scheduler.interrupted:
        stopped = {"reason": "terminated (SIGTERM)" if scheduler.stop_signal == "SIGTERM"
                   else "interrupted (Ctrl-C)"}
    return {
        "format": FORMAT,
        "pipeline": pipeline_section(pipeline),
        "options": _options(options),
        "versions": versions(),
        "machine": machine(),
        "prewarm": result.prewarm,
        "compile": {"before_frame0": before, "after_run": after,
                    "compiles_after_frame0": after["compiles"] - before["compiles"],
                    "loads_after_frame0": after["disk_hits"] - before["disk_hits"]},
        "frames": result.frames,
        "stopped": stopped,
        "live_skipped": scheduler.live_skipped(),
        "wall_s": round(result.wall_s, 6),
        "outputs": result.outputs,
        "decisions": list(policy.decisions),
        "actions": policy.counts(),
        "timings": sorted(recorder.timings, key=lambda t: (t["frame"], t["start_ns"])),
        "e2e": sorted(recorder.e2e, key=lambda e: e["frame"]),
        "summary": [row.as_dict() for row in result.report.rows],
        "warnings": list(result.warnings),
    }


def _options(options) -> dict:
    def path(value):
        return None if value is None else str(Path(value).resolve())

    return {"frames": options.frames, "workers": options.worker_count(), "rate": options.rate,
            "live": options.live, "enforce_deadlines": options.deadlines_enforced(),
            "shed": options.shed,
            "decisions": path(options.decisions), "trace": path(options.trace),
            "clock": type(options.clock).__name__,
            "reference_stages": list(options.reference_stages)}
