"""Command-line overrides of a pipeline: its sources and outputs (``--replay``, ``--camera``,
``--out``) and any stage value (``--set STAGE.PARAM=VALUE``).

One YAML serves both a recorded drive and a live camera: ``--replay DRIVE`` sets the drive
parameter (``drive_param``, see `roles`) of every stage that replays a drive (``replay``,
``bag``); ``--camera DEV`` turns them into their ``live_op`` (``camera``) with the same id (a
camera only provides ``image``, so stages wired to other replay outputs are reported); stages
that already are a live op get the device. ``--out FILE`` sets the run-log parameter
(``sink_param(op, RUN_LOG)``: ``jsonl``'s ``path``) of every run-log stage.

``--set STAGE.PARAM=VALUE`` (repeatable, applied in order, the last one of a key wins) sets one
param of one stage, one of the stage fields in `SETTABLE_FIELDS` (``yolo.deadline_ms=80``), or,
without a stage, a pipeline field in `PIPELINE_SETTABLE` (``e2e_deadline_ms=120``).
VALUE is read as a YAML value with the pipeline loader's strict rules (``0.4``, ``true``,
``[0, 1]``, ``builtin:NAME``); an unknown stage or param is refused here with a "did you mean",
and the value goes through the same checks as one written in the YAML (``validate()``), whose
errors then name ``--set STAGE.PARAM`` in place of a file:line. A relative path is relative to
the working directory, as for ``--replay``. The texts applied are kept in
``Pipeline.overrides`` (the run record's ``pipeline.overrides``). Call before ``validate()``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import Location, PipelineError, UsageError
from .pipeline import Pipeline
from .op import suggest
from .params import BUILTIN_PREFIX, Param
from .plugins import OpImportError
from .registry import lookup, registered
from .stage import Stage
from .roles import RUN_LOG, drive_param, live_op, sink_op, sink_param

CAMERA_OUTPUTS = ("image",)
# stage fields (beside its op's params) that --set may change, as the YAML writes them
SETTABLE_FIELDS = ("deadline_ms", "on_miss", "tag")
# pipeline fields --set may change, given without a stage (--set e2e_deadline_ms=120)
PIPELINE_SETTABLE = ("e2e_deadline_ms",)


def apply_cli_sources(pipeline: Pipeline, replay: str | Path | None = None,
                      camera: str | None = None, out: str | Path | None = None,
                      sets: tuple[str, ...] | list[str] = ()) -> Pipeline:
    """Apply the CLI's source/output choices and ``--set`` values in place and return the
    pipeline (unvalidated)."""
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
    for text in sets:
        _apply_set(pipeline, text)
    return pipeline


def _apply_set(pipeline: Pipeline, text: str) -> None:
    """One ``STAGE.PARAM=VALUE``: the value set, its location ``--set STAGE.PARAM``."""
    key, sep, value_text = text.partition("=")
    stage_id, dot, name = key.strip().rpartition(".")
    if sep and not dot and name in PIPELINE_SETTABLE:
        pipeline.e2e_deadline_ms = _read_value(value_text, name)
        pipeline.locs[name] = Location(f"--set {name}")
        pipeline.overrides.append(f"{name}={value_text}")
        return
    if not sep or not dot or not stage_id or not name:
        raise UsageError(f"--set {text!r}: expected STAGE.PARAM=VALUE (e.g. yolo.conf=0.4 or "
                         f"yolo.deadline_ms=80) or {'/'.join(PIPELINE_SETTABLE)}=VALUE")
    key = f"{stage_id}.{name}"
    ids = [s.id for s in pipeline.stages]
    if stage_id not in ids:
        raise UsageError(f"--set {key}: the pipeline has no stage '{stage_id}'"
                         f"{suggest(stage_id, ids)} (stages: {', '.join(ids)})")
    stage = pipeline.stage(stage_id)
    value = _read_value(value_text, key)
    where = Location(f"--set {key}")
    if name in SETTABLE_FIELDS:
        # a null deadline is refused as in the YAML (the loader keeps it as "null" likewise)
        setattr(stage, name, "null" if name == "deadline_ms" and value is None else value)
        stage.locs[name] = where
    else:
        param = _declared_param(stage, pipeline, name, key)
        if param is not None and param.type is Path:
            value = _from_working_dir(value)
        stage.params[name] = value
        stage.locs[f"params.{name}"] = stage.locs[f"key:params.{name}"] = where
    pipeline.overrides.append(f"{key}={value_text}")


def _declared_param(stage: Stage, pipeline: Pipeline, name: str, key: str) -> Param | None:
    """The stage's op's param ``name``; UsageError when the op declares none (None for an
    unknown op, left to ``validate()``, which names it with its file:line)."""
    try:
        cls = lookup(stage.op, pipeline.base_dir) if isinstance(stage.op, str) else None
    except OpImportError:  # a user op that fails to import: validate() reports it
        return None
    if cls is None:
        return None
    declared = {param.name: param for param in cls.params}
    if name not in declared:
        raise UsageError(f"--set {key}: op '{stage.op}' of stage '{stage.id}' has no param "
                         f"'{name}'{suggest(name, [*declared, *SETTABLE_FIELDS])} (params: "
                         f"{', '.join(declared) or 'none'}; stage fields: "
                         f"{', '.join(SETTABLE_FIELDS)})")
    return declared[name]


def _from_working_dir(value):
    """A relative path typed on the command line is relative to the working directory (as
    ``--replay`` and ``--out`` are), not to the YAML's folder: made absolute here. Other values
    (``builtin:NAME``, an empty string, a non-string) go to the param's own check unchanged."""
    if not isinstance(value, str) or not value.strip() or value.startswith(BUILTIN_PREFIX):
        return value
    return os.path.abspath(os.path.expanduser(value))


def _read_value(text: str, key: str):
    """VALUE as the pipeline loader reads a YAML value (plain data only; ``''`` is null)."""
    import yaml

    from .yaml_loader import StrictLoader, compose_strict

    def refuse(message, loc=None, field=None):
        return UsageError(f"--set {key}: {message}")

    node = compose_strict(text, f"--set {key}", refuse)
    if node is None:
        return None
    try:
        return StrictLoader("").construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:  # e.g. a 13th month
        raise refuse(f"cannot read the value {text!r}: {getattr(exc, 'problem', None) or exc}") \
            from None


def _check_camera_can_feed(pipeline: Pipeline, source_id: str) -> None:
    for stage in pipeline.stages:
        for port, ref in stage.inputs.items():
            if ref.stage == source_id and ref.port not in CAMERA_OUTPUTS:
                raise PipelineError(f"input '{port}' needs '{ref}', which a live camera does not "
                                    "provide (a camera gives only 'image'); use --replay",
                                    stage.loc(f"inputs.{port}"), stage.id, f"inputs.{port}")
