"""One drive of a fleet, run where a backend puts it (a pool process, a Ray worker).

``execute(job, task)`` does exactly what the single-drive verb does for that drive — it calls
``rt.run_pipeline`` (``fleet run``), ``eval.evaluate_pipeline`` (``fleet eval``) or
``rt.bench_pipeline`` (``fleet bench``) — and returns an *outcome*: a dict of plain data that
pickles to the parent and becomes the drive's results row::

    {"status": "ok" | "failed", "where": {"host", "pid", "node"}, "seconds", "frames",
     "latency": fleet.latency samples, "scores": [stage score dicts], "warnings": [...],
     "outputs": {relative path: bytes}        # fleet run: the files the sinks wrote
     "error": {"type", "message", "retryable"}}

``fleet run`` points every sink into a private temporary folder and returns the files' bytes,
so outputs reach the parent the same way from a pool process or a Ray node without a shared
file system, and a drive that fails half-way leaves no partial output behind. Its run record
gets a ``fleet`` section (host, pid, Ray node, attempt) and output paths relative to the drive's
output folder.

The drive reaches the task through ``transport.local_drive`` (its path, its shipped bytes, or
its URL). Errors: a ``CuvilError`` (bad input, a corrupt drive, a stage that raised) would fail
the same way again and is not retryable; a drive this node cannot read (``DriveNotHere``) is
retryable *elsewhere* (``error["elsewhere"]``: another node, with the drive's bytes); anything
else (``OSError``, ``MemoryError``, ...) may be the machine's fault and is retryable.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CuvilError
from .transport import DriveNotHere, local_drive

MODES = ("run", "eval", "bench")


@dataclass(frozen=True)
class FleetJob:
    """What every drive of a fleet shares: the mode, the pipeline (YAML text, so a worker needs
    no copy of the file; ``base_dir`` still resolves its relative paths), and the options."""

    mode: str
    pipeline_text: str
    pipeline_source: str
    base_dir: str
    frames: int | None = None
    workers: int = 1
    no_deadlines: bool = False
    iou_threshold: float = 0.5
    method: str = "all"
    min_height: float = 0.0
    repeat: int = 1
    budgets_text: str | None = None
    budgets_source: str | None = None
    modules: tuple[str, ...] = field(default_factory=tuple)  # op modules to import first
    sets: tuple[str, ...] = ()  # --set STAGE.PARAM=VALUE texts, applied over pipeline_text


@dataclass(frozen=True)
class DriveTask:
    """One drive to run: its position in the fleet, location (absolute path or URL), unique
    name, which attempt, the Ray nodes it failed on (``avoid``: not there again), and whether
    its bytes go with it (``ship``: a node could not read it)."""

    index: int
    drive: str
    name: str
    attempt: int = 1
    avoid: tuple[str, ...] = ()
    ship: bool = False


def where() -> dict:
    """Host, process id and (inside a Ray worker) the Ray node id of this process."""
    node = None
    try:
        import sys

        if "ray" in sys.modules:  # never import Ray just to ask
            ray = sys.modules["ray"]
            if ray.is_initialized():
                node = ray.get_runtime_context().get_node_id()
    except Exception:  # a Ray without a runtime context: no node id, still a valid row
        node = None
    return {"host": socket.gethostname(), "pid": os.getpid(), "node": node}


def load_job_pipeline(job: FleetJob, drive: str | None):
    """The job's pipeline with ``drive`` as the replay source and the job's ``--set`` values,
    unvalidated."""
    from ..graph import apply_cli_sources, parse_pipeline

    for module in job.modules:
        importlib.import_module(module)
    pipeline = parse_pipeline(job.pipeline_text, job.pipeline_source, Path(job.base_dir))
    return apply_cli_sources(pipeline, replay=drive, sets=job.sets)


def execute(job: FleetJob, task: DriveTask, shipped: dict[str, bytes] | None = None) -> dict:
    """Run one drive (``shipped``: its bytes, ``transport.pack``, for a node that cannot read
    its path); never raises for the drive's own errors (they become a failed outcome)."""
    started = time.perf_counter()
    outcome = {"where": where(), "warnings": []}
    try:
        with tempfile.TemporaryDirectory(prefix="cuvil-fleet-") as tmp:
            with local_drive(task.drive, Path(tmp), shipped) as drive:
                outcome.update(_MODES[job.mode](job, task, drive, Path(tmp),
                                                outcome["warnings"]))
        outcome["status"] = "ok"
    except CuvilError as exc:
        outcome.update(status="failed", error=error_dict(exc, retryable=False))
    except DriveNotHere as exc:
        outcome.update(status="failed", error=dict(error_dict(exc, retryable=True),
                                                   elsewhere=True))
    except Exception as exc:  # noqa: BLE001 - reported per drive; the fleet goes on
        outcome.update(status="failed", error=error_dict(exc, retryable=True))
    outcome["seconds"] = round(time.perf_counter() - started, 6)
    return outcome


def error_dict(exc: BaseException, retryable: bool) -> dict:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return {"type": type(exc).__name__, "message": message, "retryable": retryable}


def _run(job: FleetJob, task: DriveTask, drive: str, tmp: Path, warnings: list) -> dict:
    from ..rt import RunOptions, run_pipeline
    from ..rt.lifecycle import sink_outputs

    pipeline = load_job_pipeline(job, drive).validate()
    outputs = sink_outputs(pipeline)
    names = [Path(o["path"]).name for o in outputs]
    for output, name in zip(outputs, names):
        unique = name if names.count(name) == 1 else f"{output['stage']}-{name}"
        pipeline.stage(output["stage"]).params[output["param"]] = str(tmp / "out" / unique)
    pipeline.order = []
    pipeline.validate()
    options = RunOptions(frames=job.frames, workers=job.workers, rate=0.0,
                         enforce_deadlines=not job.no_deadlines, warn=warnings.append)
    result = run_pipeline(pipeline, options)
    if result.interrupted:  # a signal stopped the run (the driver's SIGTERM): so does the worker
        raise KeyboardInterrupt("the run was interrupted")
    if result.record_path is not None and Path(result.record_path).is_file():
        _annotate_record(Path(result.record_path), tmp / "out", task)
    files = {str(p.relative_to(tmp / "out")): p.read_bytes()
             for p in sorted((tmp / "out").rglob("*")) if p.is_file()}
    return {"frames": result.frames, "outputs": files,
            "latency": _latency(result.recorder, pipeline, result)}


def _annotate_record(path: Path, out: Path, task: DriveTask) -> None:
    """The run record as the fleet delivers it: output paths relative to the drive's output
    folder (not this task's temporary one), and a ``fleet`` section saying where it ran."""
    record = json.loads(path.read_text(encoding="utf-8"))
    for output in record.get("outputs", []):
        if Path(output["path"]).is_relative_to(out):
            output["path"] = str(Path(output["path"]).relative_to(out))
    record["fleet"] = {"where": where(), "drive": task.drive, "name": task.name,
                       "attempt": task.attempt}
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _eval(job: FleetJob, task: DriveTask, drive: str, tmp: Path, warnings: list) -> dict:
    from ..eval import evaluate_pipeline

    pipeline = load_job_pipeline(job, drive)
    report = evaluate_pipeline(pipeline, frames=job.frames, iou_threshold=job.iou_threshold,
                               method=job.method, min_height=job.min_height,
                               workers=job.workers, warn=warnings.append)
    return {"frames": report.frames, "scores": [score_dict(s) for s in report.scores],
            "latency": _latency(report.run.recorder, pipeline, report.run)}


def _bench(job: FleetJob, task: DriveTask, drive: str, tmp: Path, warnings: list) -> dict:
    from ..rt import bench_pipeline, parse_budgets

    spec = parse_budgets(job.budgets_text, Path(job.budgets_source))
    pipeline = load_job_pipeline(job, drive).validate()
    result = bench_pipeline(pipeline, spec, frames=job.frames or spec.frames,
                            repeat=job.repeat, workers=job.workers, warn=warnings.append)
    out = {"frames": sum(r.frames for r in result.runs),
           "latency": _latency(result.recorder, pipeline, result.runs[0])}
    if result.reference_recorder is not None:
        out["reference_latency"] = _latency(result.reference_recorder, pipeline,
                                            result.runs[0])
    return out


_MODES = {"run": _run, "eval": _eval, "bench": _bench}


def _latency(recorder, pipeline, run) -> dict:
    """The compact latency of ``recorder``; ``run``: a ``RunResult`` whose deadlines (``auto``
    resolved on the worker) the misses count against."""
    from ..rt.deadlines import run_stages
    from .latency import compact

    return compact(recorder, run_stages(pipeline, run), pipeline.e2e_deadline_ms)


def score_dict(score) -> dict:
    """An ``eval.StageScore`` with each class's matched detections (``pool`` needs them):
    ``scores`` as floats, ``hits`` as a string of 0/1, one character per detection."""
    classes = []
    for c in score.classes:
        classes.append({"class_id": c.cls, "class": c.name,
                        "ap": None if np.isnan(c.ap) else float(c.ap), "num_gt": c.num_gt,
                        "num_det": c.num_det, "tp": c.tp,
                        "scores": [float(v) for v in c.scores],
                        "hits": "".join("1" if h else "0" for h in c.hits)})
    return {"stage": score.stage, "op": score.op, "metric": score.metric, "classes": classes}
