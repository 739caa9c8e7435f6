"""Op instances of a run: build, open (both variants of a degradable stage), close, outputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import CuvilError, ExecutionError, OutputWriteError
from ..graph import Sink, Source


def build_instances(pipeline) -> dict[str, dict[str, object]]:
    """``{stage_id: {"normal": op, "degraded": op}}``; ``degraded`` only for stages that declare it.

    Both variants are built (and later opened and prewarmed) before frame 0, so switching to the
    cheaper variant after a miss costs nothing at run time.
    """
    instances = {}
    for stage in pipeline.ordered():
        variants = {"normal": stage.make_op()}
        if stage.degrade is not None and stage.degrade_params is not None:
            variants["degraded"] = stage.make_op(degraded=True)
        instances[stage.id] = variants
    return instances


def all_ops(instances) -> list[tuple[str, object]]:
    """``[(stage_id, op)]`` over every variant, in pipeline order."""
    return [(sid, op) for sid, variants in instances.items() for op in variants.values()]


def open_all(instances, ctx, timed_passes: dict[str, int] | None = None) -> None:
    """Open every op in pipeline order; on a failure close the ones already open and raise.

    Each op gets its own copy of ``ctx`` with its stage's ``stage_id``; ``timed_passes``:
    ``{stage id: n}``, the ``timed_warmup_passes`` of that stage's normal variant only (for
    ``deadline_ms: auto``)."""
    opened = []
    for stage_id, op in all_ops(instances):
        timed = (timed_passes or {}).get(stage_id, 0) \
            if op is instances[stage_id]["normal"] else 0
        stage_ctx = replace(ctx, stage_id=stage_id, timed_warmup_passes=timed)
        try:
            op.open(stage_ctx)
        except CuvilError:
            close_ops(opened + [(stage_id, op)], ctx.warning)
            raise
        except Exception as exc:
            close_ops(opened + [(stage_id, op)], ctx.warning)
            raise ExecutionError(f"stage '{stage_id}' (op {op.name}) failed to open: "
                                 f"{type(exc).__name__}: {exc}") from exc
        opened.append((stage_id, op))


def close_ops(ops, warn) -> OutputWriteError | None:
    """Close each op (sinks flush here); a failing close is a warning, not a lost run, except a
    failed write (a sink writing in the background finishes its last frames here): the first
    ``OutputWriteError`` is returned, for the run to fail with it (exit 2) like a write that
    failed during a frame."""
    failed_write = None
    for stage_id, op in ops:
        try:
            op.close()
        except OutputWriteError as exc:
            failed_write = failed_write or exc
        except Exception as exc:  # keep closing the others; the primary error matters more
            warn(f"stage '{stage_id}': close() failed: {type(exc).__name__}: {exc}")
    return failed_write


def is_source(stage) -> bool:
    return stage.op_cls is not None and issubclass(stage.op_cls, Source)


def sink_outputs(pipeline) -> list[dict]:
    """Files and folders the sinks write: every Path-valued param of a Sink stage."""
    found = []
    for stage in pipeline.ordered():
        if stage.op_cls is None or not issubclass(stage.op_cls, Sink):
            continue
        for name, value in stage.resolved_params.items():
            if isinstance(value, Path):
                found.append({"stage": stage.id, "op": stage.op, "param": name,
                              "path": str(value)})
    return found


def ancestors(pipeline) -> dict[str, set[str]]:
    """Every stage's transitive upstream stage ids (itself excluded)."""
    up: dict[str, set[str]] = {}
    for stage in pipeline.ordered():
        found: set[str] = set()
        for ref in stage.inputs.values():
            found.add(ref.stage)
            found |= up[ref.stage]
        up[stage.id] = found
    return up
