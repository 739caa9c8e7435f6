"""Run a pipeline over a labelled drive and score every detector stage in it.

``evaluate_pipeline(pipeline)``:

1. removes the pipeline's own sinks (an evaluation must not overwrite a run's outputs) and adds
   one run-log capture stage (``roles.sink_op(RUN_LOG)``: ``jsonl``) wired to the drive
   source's ``ground_truth`` and to the outputs of every detector stage, found by their ops'
   roles (`graph.roles`): ``detections_2d`` (scored 2D), ``boxes_3d`` + ``scores_3d`` +
   ``labels_3d`` (BEV), ``objects`` (both);
2. runs it through ``rt.run_pipeline`` with deadlines measured but not enforced, so every frame
   reaches the capture and the result depends only on the drive;
3. reads the capture back and scores each stage (``scoring``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..graph import Pipeline, Sink, lookup, registered
from ..graph import roles as R
from .ap import METHOD_NAMES, METHODS
from .runlog import read_run
from .scoring import StageScore, fused_as_2d, fused_as_bev, score_2d, score_bev

CAPTURE = "eval_capture"
GT = "gt_labels"


@dataclass
class EvalReport:
    """Scores of every detector stage of a pipeline on one drive."""

    pipeline: str
    drive: str
    frames: int
    iou_threshold: float
    method: str
    min_height: float
    scores: list[StageScore] = field(default_factory=list)
    stage_ms: dict = field(default_factory=dict)  # detector stage -> p50 wall time of the run (ms)
    run: object = field(default=None, repr=False)  # the rt.RunResult (latencies, warnings)

    def score(self, stage: str, metric: str) -> StageScore:
        for item in self.scores:
            if item.stage == stage and item.metric == metric:
                return item
        raise KeyError(f"{stage}/{metric}")

    def as_dict(self) -> dict:
        return {"format": "cuvil-eval/1", "pipeline": self.pipeline, "drive": self.drive,
                "frames": self.frames, "iou_threshold": self.iou_threshold,
                "interpolation": self.method, "interpolation_name": METHOD_NAMES[self.method],
                "min_height_px": self.min_height,
                "results": [s.as_dict() for s in self.scores]}

    def timing_dict(self) -> dict:
        """The measured wall times (differ run to run), kept out of ``as_dict`` so the scores
        are the same bytes for the same input: detector stage -> p50 ms."""
        return {"stage_p50_ms": {k: round(v, 4) for k, v in self.stage_ms.items()}}


def evaluate_pipeline(pipeline: Pipeline, *, frames: int | None = None,
                      iou_threshold: float = 0.5, method: str = "all", min_height: float = 0.0,
                      workers: int | None = None, warn=None, progress=None) -> EvalReport:
    """Run ``pipeline`` (a replay source with labels, one or more detector stages) and score it;
    see the module docstring. The pipeline object is modified in place (sinks removed, the
    capture added): pass a freshly loaded one. ``progress(done, total or 0)`` is called after
    each frame. UsageError when there is nothing to score."""
    from ..rt import RunOptions, run_pipeline

    if method not in METHODS:
        raise UsageError(f"interpolation must be one of {', '.join(METHODS)}, got {method!r}")
    if not 0.0 < iou_threshold <= 1.0:
        raise UsageError(f"IoU threshold must be within (0, 1], got {iou_threshold}")
    replay, detectors = _prepare(pipeline)
    drive = Path(replay.resolved_params[R.drive_param(replay.op)])
    if not (drive / "labels").is_dir():
        raise UsageError(f"{drive}: the drive has no labels/ folder, so there is nothing to "
                         "score against (see docs/drive-format.md)")
    with tempfile.TemporaryDirectory(prefix="cuvil-eval-") as tmp:
        capture = Path(tmp) / "capture.jsonl"
        wiring = _add_capture(pipeline, replay, detectors, capture)
        options = RunOptions(frames=frames, workers=workers, enforce_deadlines=False,
                             write_record=False, warn=warn,
                             progress=_with_total(progress, frames, replay, drive))
        result = run_pipeline(pipeline, options)
        captured = read_run(capture)
    report = EvalReport(pipeline.name, str(drive), len(captured), iou_threshold, method,
                        min_height, run=result)
    report.stage_ms = {s.id: result.report.row(s.id).p50 for s in detectors}
    for stage in detectors:
        report.scores.extend(_score_stage(pipeline, stage, wiring, captured, report))
    return report


def _with_total(progress, frames: int | None, replay, drive: Path):
    """``progress`` told the frame count when ``frames`` leaves it to the drive (the executor
    passes 0 then): the drive's synchronised frame pairs."""
    if progress is None or frames is not None:
        return progress
    from ..drives import open_recording

    tolerance = replay.resolved_params.get("sync_tolerance_ms", 50.0)
    recording = open_recording(drive, tolerance)  # any registered format
    total = len(recording.pairs)
    if hasattr(recording, "close"):  # a bag holds its file open
        recording.close()
    return lambda done, _: progress(done, max(total, done))


def _prepare(pipeline: Pipeline):
    """Drop sink stages, validate, and find the replay stage and the detector stages."""
    pipeline.stages = [s for s in pipeline.stages if not _is_sink(s.op)]
    pipeline.order = []
    pipeline.validate()
    replays = [s for s in pipeline.ordered()
               if R.drive_param(s.op) and R.GROUND_TRUTH in R.op_roles(s.op)]
    if len(replays) != 1:
        raise UsageError(f"{pipeline.source}: eval needs exactly one 'replay' stage (the drive "
                         f"with labels), found {len(replays)}")
    detectors = [s for s in pipeline.ordered() if R.is_detector(s.op)]
    if not detectors:
        ops = [name for name in registered() if R.is_detector(name)]
        raise UsageError(f"{pipeline.source}: no detector stage to score (ops: "
                         f"{', '.join(ops)})")
    return replays[0], detectors


def _is_sink(op_name: str) -> bool:
    cls = lookup(op_name)
    return cls is not None and issubclass(cls, Sink)


def _add_capture(pipeline: Pipeline, replay, detectors, path: Path) -> dict:
    """Add the capture sink; returns {(stage id, port): capture input name}."""
    wiring = {(replay.id, R.op_roles(replay.op)[R.GROUND_TRUTH]): GT}
    for stage in detectors:
        roles = R.op_roles(stage.op)
        ports = [roles[r] for r in R.DETECTOR_ROLES if r in roles and
                 (R.OBJECTS not in roles or r == R.OBJECTS)]
        for port in ports:
            wiring[(stage.id, port)] = f"{stage.id}__{port}"
    inputs = {name: f"{sid}/{port}" for (sid, port), name in wiring.items()}
    op = R.sink_op(R.RUN_LOG)  # the package's own run log: every array in full
    pipeline.add(CAPTURE, op, inputs=inputs, max_values=2**62,
                 **{R.sink_param(op, R.RUN_LOG): str(path)})
    pipeline.validate()
    return wiring


def _score_stage(pipeline, stage, wiring, captured, report) -> list[StageScore]:
    """The 2D and/or BEV scores of one detector stage, by its op's roles (2D first)."""
    roles = R.op_roles(stage.op)

    def column(role):
        name = wiring[(stage.id, roles[role])]
        return [(f.outputs[name], f.outputs[GT]) for f in captured]

    iou, method, xy = report.iou_threshold, report.method, R.bev_range(pipeline, stage)
    two_d = bev = None
    if R.OBJECTS in roles:
        objects = column(R.OBJECTS)
        two_d = [(fused_as_2d(o), gt) for o, gt in objects]
        bev = [fused_as_bev(o) + (gt,) for o, gt in objects]
    if R.DETECTIONS_2D in roles and two_d is None:
        two_d = column(R.DETECTIONS_2D)
    if R.BOXES_3D in roles and bev is None:
        boxes, scores, labels = (column(r) for r in (R.BOXES_3D, R.SCORES_3D, R.LABELS_3D))
        bev = [(b, s, c, gt) for (b, gt), (s, _), (c, _) in zip(boxes, scores, labels)]
    scores = []
    if two_d is not None:
        scores.append(StageScore(stage.id, stage.op, "2d",
                                 score_2d(two_d, iou, method, report.min_height)))
    if bev is not None:
        scores.append(StageScore(stage.id, stage.op, "bev", score_bev(bev, iou, method, xy)))
    return scores
