"""``rt calibrate``: measure the ``deadline_ms: auto`` stages on replayed frames and keep them.

A run's own warm-up passes (``deadlines``) time each detector alone, on a synthetic input. This
replays a drive the way ``bench`` does (rate 0, deadlines not enforced, sinks writing into a
temporary folder), so the stages run on real frames side by side, and applies the same rule to
their stage times: the p99 of the frames x ``deadlines.MARGIN``, rounded up to
``deadlines.STEP_MS``, bounded by ``e2e_deadline_ms`` when the run uses it. The values go into
the per-machine cache (``deadline_cache``, origin ``"rt calibrate"``), where every later run of
the pipeline on this machine (same CPU, ONNX Runtime, pipeline, intra-op threads) finds them;
``write_pinned`` also writes a copy of the YAML with the ms in place of ``auto``.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from . import deadline_cache
from .deadlines import MARGIN, STEP_MS, bounded

ORIGIN = "rt calibrate"


@dataclass
class Calibration:
    """One auto stage: its frame times (ms), the warm-up passes of the same run (ms), the
    deadline before and after the e2e bound."""

    stage: str
    frames_ms: list[float]
    warmup_ms: list[float]
    uncapped_ms: float
    ms: float
    rule: str  # how uncapped_ms was computed (what the cache keeps)
    bound_rule: str  # the same with the e2e bound, when it applied (what ms is)


def calibrate(pipeline, frames: int, workers: int | None, warn=None,
              store: bool = True) -> list[Calibration]:
    """Measure every ``auto`` stage of the validated ``pipeline`` (its drive as given)."""
    from .bench import _redirect_sinks
    from .executor import run_pipeline
    from .options import RunOptions
    from .placement import intra_op_threads

    auto = [s.id for s in pipeline.ordered() if s.auto_deadline]
    if not auto:
        raise UsageError(f"{pipeline.source}: no stage has 'deadline_ms: auto'; nothing to "
                         "calibrate")
    options = RunOptions(frames=frames, workers=workers, rate=0.0, enforce_deadlines=False,
                         write_record=False, warn=warn, deadline_cache=False)
    key = deadline_cache.key_fields(pipeline, intra_op_threads(options.worker_count()))
    with tempfile.TemporaryDirectory(prefix="cuvil-calibrate-") as scratch:
        _redirect_sinks(pipeline, Path(scratch))
        result = run_pipeline(pipeline, options)
    found = [_one(sid, result, pipeline.e2e_deadline_ms) for sid in auto]
    if store:
        deadline_cache.store(key, {c.stage: {"ms": c.uncapped_ms, "passes_ms": c.frames_ms,
                                             "origin": ORIGIN, "rule": c.rule}
                                   for c in found}, warn)
    return found


def _one(stage_id: str, result, e2e_deadline_ms) -> Calibration:
    times = [round((t["end_ns"] - t["start_ns"]) / 1e6, 4) for t in result.recorder.timings
             if t["stage"] == stage_id and t["variant"] == "normal"]
    if not times:
        raise UsageError(f"stage '{stage_id}' ran no frame (the drive has none, or an input "
                         "was never produced); nothing to calibrate on")
    p99 = float(np.percentile(times, 99))
    ms = max(STEP_MS, math.ceil(p99 * MARGIN / STEP_MS - 1e-9) * STEP_MS)
    rule = f"p99 {p99:.1f} ms of {len(times)} frames x {MARGIN:g}"
    capped_ms, _, capped_rule = bounded(float(ms), rule, e2e_deadline_ms)
    warmup = list(result.deadlines.get(stage_id, {}).get("passes_ms", []))
    return Calibration(stage_id, times, warmup, float(ms), capped_ms, rule, capped_rule)


def write_pinned(pipeline, found: list[Calibration], target: Path, note: str) -> Path:
    """A copy of the pipeline's YAML where each calibrated ``deadline_ms: auto`` reads the
    measured ms (comments and layout kept; ``note`` is appended as a comment on the line)."""
    from ..output_files import write_text_atomic

    source = Path(pipeline.source)
    if not source.is_file():
        raise UsageError("--write needs a pipeline read from a YAML file")
    if target.resolve() == source.resolve():
        raise UsageError(f"--write {target}: that is the pipeline itself; write the pinned "
                         "copy to another file")
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    by_id = {s.id: s for s in pipeline.ordered()}
    for item in found:
        loc = by_id[item.stage].loc("deadline_ms")
        row = lines[loc.line - 1]
        column = loc.column - 1
        if row[column:column + 4] != "auto":
            raise UsageError(f"{source}:{loc.line}: cannot find 'auto' to replace for stage "
                             f"'{item.stage}'")
        head = row[:column] + f"{item.ms:g}" + row[column + 4:].split("#")[0].rstrip()
        lines[loc.line - 1] = f"{head}  # {ORIGIN}: {note}" + ("\n" if row.endswith("\n") else "")
    return write_text_atomic(target, "".join(lines))
