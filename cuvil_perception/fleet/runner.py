"""The driver loop of a fleet: skip finished drives, submit the rest, record each as it ends.

For every drive, in fleet order: a drive whose (path, fingerprint, pipeline hash) has an ``ok``
row in the results file being resumed is not run again. The others go to the backend, at most
``backend.slots`` at a time. As each one finishes:

- a failed attempt whose error is retryable (the worker died, its node was lost, a
  machine-level error, a node that cannot read the drive) runs once more (``MAX_ATTEMPTS`` = 2),
  never on the node it failed on (``DriveTask.avoid``), and with the drive's bytes when that
  node could not read it (``DriveTask.ship``); ``on_retry`` is told. A deterministic failure
  (a corrupt drive, a stage that raised) is final at once;
- its outputs (``fleet run``) are written under ``OUT/drives/NAME/`` (into a temporary folder
  renamed into place, so a folder there is always a whole drive's output), then its row is
  appended to the results file, then ``on_row`` is told (progress display).

Ctrl-C (KeyboardInterrupt) stops the backend at once; drives in flight are not recorded, every
recorded row is complete, and the returned ``FleetRun`` says ``interrupted``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..temp_files import sweep_stale, temp_path
from .drives import DriveRef, fingerprint
from .results import ResultsFile, row_key
from .task import DriveTask, FleetJob

MAX_ATTEMPTS = 2
DRIVES_DIR = "drives"


@dataclass
class FleetRun:
    """What the loop did: one row per drive in fleet order (None: not finished), how many were
    resumed from the results file, the per-node prewarm rows, wall time, interruption."""

    rows: list[dict | None]
    resumed: int = 0
    prewarm: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


def run_fleet(job: FleetJob, drives: list[DriveRef], backend, results: ResultsFile,
              pipeline_hash: str, out_dir: Path,
              on_row: Callable[[dict], None] | None = None,
              on_start: Callable[[int, int], None] | None = None,
              on_retry: Callable[[DriveTask, dict], None] | None = None) -> FleetRun:
    """Run every drive not finished yet (see the module docstring)."""
    started = time.perf_counter()
    finished = results.finished()
    run = FleetRun([None] * len(drives))
    todo, prints = deque(), {}
    for index, drive in enumerate(drives):
        prints[index] = fingerprint(drive)
        previous = finished.get((drive.location, prints[index], pipeline_hash))
        if previous is not None:
            run.rows[index] = dict(previous, resumed=True)
            run.resumed += 1
        else:
            todo.append(DriveTask(index, drive.location, drive.name))
    context = _Context(job, drives, results, pipeline_hash, out_dir, prints, run, on_row,
                       on_retry)
    try:
        if todo:
            run.prewarm = backend.start(job, [t.drive for t in todo])
        if on_start is not None:
            on_start(len(drives), run.resumed)
        _loop(backend, todo, context)
    except KeyboardInterrupt:
        run.interrupted = True
        backend.close(cancel=True)
    except BaseException:
        backend.close(cancel=True)
        raise
    else:
        backend.close(cancel=False)
    run.wall_s = time.perf_counter() - started
    return run


@dataclass
class _Context:
    job: FleetJob
    drives: list[DriveRef]
    results: ResultsFile
    pipeline_hash: str
    out_dir: Path
    prints: dict[int, str]
    run: FleetRun
    on_row: Callable[[dict], None] | None
    on_retry: Callable[[DriveTask, dict], None] | None
    attempts: dict[int, list[dict]] = field(default_factory=dict)


def _loop(backend, todo: deque, ctx: _Context) -> None:
    in_flight = 0
    while todo or in_flight:
        while todo and in_flight < backend.slots:
            backend.submit(todo.popleft())
            in_flight += 1
        for task, outcome in backend.wait(0.25):
            in_flight -= 1
            ctx.attempts.setdefault(task.index, []).append(_attempt(task, outcome))
            error = outcome.get("error") or {}
            if outcome["status"] != "ok" and error.get("retryable") \
                    and task.attempt < MAX_ATTEMPTS:
                retry = _retry(task, outcome)
                todo.appendleft(retry)
                if ctx.on_retry is not None:
                    ctx.on_retry(retry, outcome)
                continue
            row = _row(task, outcome, ctx)
            ctx.results.append(row)
            ctx.run.rows[task.index] = row
            if ctx.on_row is not None:
                ctx.on_row(row)


def _retry(task: DriveTask, outcome: dict) -> DriveTask:
    """The next attempt: not on the node that failed, with the bytes if it could not read."""
    node = (outcome.get("where") or {}).get("node")
    avoid = task.avoid + ((node,) if node and node not in task.avoid else ())
    return replace(task, attempt=task.attempt + 1, avoid=avoid,
                   ship=task.ship or bool(outcome["error"].get("elsewhere")))


def _attempt(task: DriveTask, outcome: dict) -> dict:
    return {"attempt": task.attempt, "status": outcome["status"], "where": outcome["where"],
            "seconds": outcome.get("seconds"), "error": outcome.get("error")}


def _row(task: DriveTask, outcome: dict, ctx: _Context) -> dict:
    """The results row of a finished drive; its outputs are written first."""
    drive = ctx.drives[task.index]
    row = {"drive": drive.location, "name": drive.name, "fingerprint": ctx.prints[task.index],
           "pipeline_hash": ctx.pipeline_hash, "mode": ctx.job.mode,
           "status": outcome["status"], "where": outcome["where"],
           "seconds": outcome.get("seconds"), "attempts": ctx.attempts[task.index],
           "warnings": outcome.get("warnings", [])}
    for key in ("frames", "error", "scores", "latency", "reference_latency"):
        if key in outcome:
            row[key] = outcome[key]
    if outcome["status"] == "ok" and "outputs" in outcome:
        row["outputs"] = write_outputs(ctx.out_dir / DRIVES_DIR / drive.name, outcome["outputs"])
    return row


def write_outputs(folder: Path, files: dict[str, bytes]) -> list[str]:
    """Write ``{relative path: bytes}`` as ``folder`` (replacing an older output of this fleet
    there); returns the paths written, relative to the fleet's out folder. The files go to a
    staging folder first (``temp_files.temp_path``), removed if the write fails."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(folder.parent)
    staging = temp_path(folder)
    try:
        staging.mkdir()
        for relative, data in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [str(Path(DRIVES_DIR) / folder.name / r) for r in files]
