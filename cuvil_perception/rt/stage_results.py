"""What the executors check of a stage's result, and how a stage's exception is reported."""

from __future__ import annotations

from ..errors import CuvilError, ExecutionError


def check_outputs(stage, outputs) -> BaseException | None:
    """An ``ExecutionError`` when ``outputs`` is not a dict holding every declared port with a
    value that fits its spec (dtype, static shape), else None."""
    if not isinstance(outputs, dict):
        return ExecutionError(f"stage '{stage.id}' (op {stage.op}) returned "
                              f"{type(outputs).__name__}, not a dict of outputs")
    for port, spec in stage.output_specs.items():
        if port not in outputs:
            return ExecutionError(f"stage '{stage.id}' (op {stage.op}) did not produce "
                                  f"output '{port}'")
        problem = spec.check_value(outputs[port])
        if problem is not None:
            return ExecutionError(f"stage '{stage.id}' output '{port}': {problem}")
    return None


def wrap_error(exc: BaseException, stage, frame: int) -> BaseException:
    """A stage's own ``CuvilError`` unchanged (e.g. an ``OutputWriteError``: exit 2); anything
    else as an ``ExecutionError`` naming the stage, op and frame (the cause kept)."""
    if isinstance(exc, CuvilError):
        return exc
    wrapped = ExecutionError(f"stage '{stage.id}' (op {stage.op}) failed on frame {frame}: "
                             f"{type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped
