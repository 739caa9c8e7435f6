"""What the executors check of a stage's result, how a stage's exception is reported, and the
timing row both executors record per stage call."""

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


def timing_row(frame: int, stage: str, variant: str, start_ns: int, end_ns: int, cpu_ns: int,
               worker: str, tid: int) -> dict:
    """One recorded stage call (clock ns, thread CPU ns); key order is part of the record."""
    return {"frame": frame, "stage": stage, "start_ns": start_ns, "end_ns": end_ns,
            "cpu_ns": cpu_ns, "worker": worker, "tid": tid, "variant": variant, "outcome": "ok"}
