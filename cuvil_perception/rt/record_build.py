"""Assemble the run-record dict (format described in ``record``) from a finished run's
``RunState`` and ``RunResult``."""

from __future__ import annotations

from pathlib import Path

from .record import FORMAT, machine, pipeline_section, versions


def build_record(state, result) -> dict:
    before, after = state.compile["before_frame0"], state.compile["after_run"]
    return {
        "format": FORMAT,
        "pipeline": pipeline_section(state.pipeline),
        "options": _options(state.options),
        "versions": versions(),
        "machine": machine(),
        "threads": list(state.threads),
        "prewarm": result.prewarm,
        "compile": {"before_frame0": before, "after_run": after,
                    "compiles_after_frame0": after["compiles"] - before["compiles"],
                    "loads_after_frame0": after["disk_hits"] - before["disk_hits"]},
        "frames": result.frames,
        "stopped": state.stopped(),
        "live_skipped": state.live_skipped,
        "wall_s": round(result.wall_s, 6),
        "outputs": result.outputs,
        "deadlines": {sid: d.as_dict() for sid, d in state.deadlines.items()},
        "decisions": list(state.policy.decisions),
        "actions": state.policy.counts(),
        "timings": sorted(state.recorder.timings, key=lambda t: (t["frame"], t["start_ns"])),
        "e2e": sorted(state.recorder.e2e, key=lambda e: e["frame"]),
        "summary": [row.as_dict() for row in result.report.rows],
        "warnings": list(result.warnings),
    }


def _options(options) -> dict:
    def path(value):
        return None if value is None else str(Path(value).resolve())

    return {"frames": options.frames, "workers": options.worker_count(), "rate": options.rate,
            "live": options.live, "enforce_deadlines": options.deadlines_enforced(),
            "shed": options.shed, "deadline_cache": options.deadline_cache,
            "decisions": path(options.decisions), "trace": path(options.trace),
            "clock": type(options.clock).__name__,
            "reference_stages": list(options.reference_stages)}
