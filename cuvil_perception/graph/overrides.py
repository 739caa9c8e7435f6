"""Command-line overrides of a pipeline's sources and outputs (``--replay``, ``--camera``,
``--out``).

One YAML serves both a recorded drive and a live camera: ``--replay DRIVE`` sets the drive
parameter (``drive_param``, see `roles`) of every stage that replays a drive (``replay``,
``bag``); ``--camera DEV`` turns them into their ``live_op`` (``camera``) with the same id (a
camera only provides ``image``, so stages wired to other replay outputs are reported); stages
that already are a live op get the device. ``--out FILE`` sets the run-log parameter
(``sink_param(op, RUN_LOG)``: ``jsonl``'s ``path``) of every run-log stage. Call before
``validate()``.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PipelineError, UsageError
from .pipeline import Pipeline
from .op import registered
from .roles import RUN_LOG, drive_param, live_op, sink_op, sink_param

CAMERA_OUTPUTS = ("image",)


def apply_cli_sources(pipeline: Pipeline, replay: str | Path | None = None,
                      camera: str | None = None, out: str | Path | None = None) -> Pipeline:
    """Apply the CLI's source/output choices in place and return the pipeline (unvalidated)."""
    if replay is not None and camera is not None:
        raise UsageError("give either --replay DRIVE or --camera DEVICE, not both")
    replays = [s for s in pipeline.stages if drive_param(s.op)]
    lives = {cls.live_op for cls in registered().values()} - {None}
    cameras = [s for s in pipeline.stages if s.op in lives]
    if replay is not None:
        if not replays:
            raise UsageError(f"{pipeline.source}: --replay given, but the pipeline has no "
                             "'replay' stage")
        for stage in replays:
            # CLI paths are relative to the working directory, so make them absolute here.
            stage.params[drive_param(stage.op)] = str(Path(replay).expanduser().resolve())
    if camera is not None:
        if not replays and not cameras:
            raise UsageError(f"{pipeline.source}: --camera given, but the pipeline has no "
                             "'replay' or 'camera' stage")
        for stage in replays:
            if live_op(stage.op) is None:
                raise UsageError(f"{pipeline.source}: stage '{stage.id}' (op {stage.op}) has "
                                 "no live counterpart, so --camera cannot replace it")
            _check_camera_can_feed(pipeline, stage.id)
            stage.op = live_op(stage.op)
            stage.params = {"device": camera}
        for stage in cameras:
            stage.params["device"] = camera
    if out is not None:
        sinks = [s for s in pipeline.stages if sink_param(s.op, RUN_LOG)]
        if not sinks:
            raise UsageError(f"{pipeline.source}: --out given, but the pipeline has no "
                             f"'{sink_op(RUN_LOG)}' stage (nor another run-log sink)")
        for stage in sinks:
            stage.params[sink_param(stage.op, RUN_LOG)] = str(Path(out).expanduser().resolve())
    return pipeline


def _check_camera_can_feed(pipeline: Pipeline, source_id: str) -> None:
    for stage in pipeline.stages:
        for port, ref in stage.inputs.items():
            if ref.stage == source_id and ref.port not in CAMERA_OUTPUTS:
                raise PipelineError(f"input '{port}' needs '{ref}', which a live camera does not "
                                    "provide (a camera gives only 'image'); use --replay",
                                    stage.loc(f"inputs.{port}"), stage.id, f"inputs.{port}")
