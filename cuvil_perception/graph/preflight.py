"""Checks that need the file system but no sensor: what ``run`` verifies before it opens any
stage, and ``inspect`` verifies too, so both refuse the same pipelines with the same message.

In order: the pipeline has a source stage; every param declared ``must_exist`` names a file
that is there (model files); every op's optional ``preflight()`` hook passes (it may raise
``ParamProblem`` to blame a param, or any `UsageError` naming its own file; the replay
source reads its drive's index: layout, timestamps, calibration, first image header). Loading
a model to check its layout stays in ``open()``: it costs as much as running it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PipelineError, UsageError
from .op import ParamProblem, Source
from .pipeline import Pipeline


def preflight(pipeline: Pipeline) -> None:
    """Raise the `UsageError` ``run`` would raise before frame 0 for a validated pipeline."""
    stages = pipeline.ordered()
    if not any(s.op_cls is not None and issubclass(s.op_cls, Source) for s in stages):
        raise UsageError("the pipeline has no source stage (replay, camera, ...): nothing "
                         "produces frames")
    for stage in stages:
        for param in stage.op_cls.params:
            value = stage.resolved_params.get(param.name)
            if param.must_exist and isinstance(value, Path) and not value.exists():
                raise PipelineError(f"{value}: no such file", stage.loc(f"params.{param.name}"),
                                    stage.id, f"params.{param.name}")
        hook = getattr(stage.op_cls, "preflight", None)
        if hook is not None:
            try:
                stage.make_op().preflight()
            except ParamProblem as exc:  # blame the param, with the stage's file:line
                field = f"params.{exc.param}"
                raise PipelineError(exc.reason, stage.loc(field), stage.id, field) from None
