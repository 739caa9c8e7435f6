"""Sink ops: ``jsonl`` (one JSON object per frame, crash-safe) and ``png`` (image files).

JSONL line schema (docs/drive-format.md has the full table)::

    {"frame": 0, "timestamp_ns": 1767268800000085957, "stamps": {"points": ..., "image": ...},
     "stale": {}, "outputs": {"<input>": {"dtype": "float32", "shape": [3, 4], "data": [...]}}}

A frame that a recorded decision dropped still gets its line, with the decision and no outputs::

    {"frame": 2, "timestamp_ns": ..., "stamps": {...}, "stale": {},
     "dropped": {"stage": "yolo", "policy": "drop", "reason": "deadline_miss"}, "outputs": {}}

Arrays with more than ``max_values`` elements are written without ``data`` but with ``sha256``
of their C-order bytes, so runs stay comparable without megabyte lines.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import cv2
import numpy as np

from ..errors import OutputWriteError, UsageError
from ..graph import FrameInfo, Param, PortSpec, Range, RunContext, Sink, register
from ..output_files import LineWriter, describe_os_error, mark_folder, write_bytes_atomic


def _float_text(value: float) -> float | str:
    """A finite float as the Python float whose repr is the value's shortest repr; NaN and
    infinities as the strings "NaN", "Infinity", "-Infinity" (strict JSON has no such numbers)."""
    as_float = float(value)
    if math.isnan(as_float):
        return "NaN"
    if math.isinf(as_float):
        return "Infinity" if as_float > 0 else "-Infinity"
    if isinstance(value, np.floating) and value.dtype != np.float64:
        return float(str(value))  # str() of a float32 is its shortest round-trip repr
    return as_float


def encode_array(array: np.ndarray, max_values: int) -> dict:
    """``{"dtype", "shape", "data"}`` (or ``"sha256"`` instead of data when too large).

    ``data`` is nested lists in C order (a scalar for 0-d arrays); floats use the shortest
    text that reads back to the same value of the array's dtype, so the bytes are deterministic.
    """
    array = np.asarray(array)
    out: dict = {"dtype": str(array.dtype), "shape": list(array.shape)}
    if array.size > max_values:
        out["sha256"] = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        return out
    if array.dtype.kind == "f":
        flat = [_float_text(v) for v in array.ravel()]
        nested = np.array(flat, dtype=object).reshape(array.shape)
        out["data"] = nested.tolist() if array.ndim else nested.item()
    elif array.dtype.kind in "biu":
        out["data"] = array.tolist()
    else:
        raise TypeError(f"cannot write dtype {array.dtype} to JSON")
    return out


@register
class JsonlSink(Sink):
    """Append one JSON line per frame, dropped frames included (``process_dropped``); lines go
    through ``output_files.LineWriter``, so a kill, a crash or a full disk leaves a file whose
    every line is a complete JSON object, and a failed write is an ``OutputWriteError``."""

    name = "jsonl"
    tag = "io"
    sink_roles = {"run_log": "path"}  # --out sets it; --summary, render and eval read it back
    doc = "Write every connected input, per frame, as one JSON object per line."
    params = (
        Param("path", Path, Path("run.jsonl"), "output file (parent folders are created)"),
        Param("max_values", int, 4096, "larger arrays get a sha256 instead of their data",
              range=Range(0, 2**62)),
        Param("fsync", bool, False, "fsync after every line (survives power loss, slower)"),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self._writer: LineWriter | None = None

    def open(self, ctx: RunContext) -> None:
        path = Path(self.p["path"])
        try:
            self._writer = LineWriter(path, fsync=self.p["fsync"])
        except OSError as exc:
            raise OutputWriteError(path, f"cannot write JSONL output "
                                   f"({describe_os_error(exc)})") from None

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        record = _frame_fields(frame)
        record["outputs"] = {name: encode_array(inputs[name], self.p["max_values"])
                             for name in sorted(inputs)}
        self._write(record)
        return {}

    def process_dropped(self, frame: FrameInfo, reason: dict) -> None:
        """The line of a frame a decision dropped: ``dropped`` = {stage, policy, reason}."""
        record = _frame_fields(frame)
        record["dropped"] = {k: reason.get(k) for k in ("stage", "policy", "reason")}
        record["outputs"] = {}
        self._write(record)

    def _write(self, record: dict) -> None:
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        self._writer.write_line(line)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _frame_fields(frame: FrameInfo) -> dict:
    """The fields every line starts with (``frame`` first: ``output_files`` recognises it)."""
    return {"frame": frame.index, "timestamp_ns": int(frame.timestamp_ns),
            "stamps": {k: int(v) for k, v in sorted(frame.stamps.items())},
            "stale": {k: int(v) for k, v in sorted(frame.stale.items())}}


@register
class PngSink(Sink):
    """Write each connected image input per frame as ``<dir>/<input>/<frame:06d>.png``.

    Inputs must be uint8 [H, W] (grey) or [H, W, 3] (BGR).
    """

    name = "png"
    tag = "io"
    doc = "Write image inputs as PNG files, one folder per input."
    folder_params = ("dir",)  # the output-path policy treats these params as folders
    params = (
        Param("dir", Path, Path("frames"), "output folder (created)"),
        Param("compression", int, 3, "PNG compression level 0 (fast) .. 9 (small)",
              range=Range(0, 9)),
    )

    def input_ports(self) -> tuple[PortSpec, ...]:
        ports = []
        for name, spec in self.connected.items():
            grey = spec.shape is not None and len(spec.shape) == 2
            ports.append(PortSpec(name, "uint8", (None, None) if grey else (None, None, 3),
                                  "image to write"))
        return tuple(ports)

    def open(self, ctx: RunContext) -> None:
        root = Path(self.p["dir"])
        try:
            mark_folder(root, "png sink", frame_dirs=tuple(self.connected))
            for name in self.connected:
                (root / name).mkdir(parents=True, exist_ok=True)
        except (OSError, OutputWriteError) as exc:
            raise OutputWriteError(root, "cannot create the PNG output folder "
                                   f"({exc})") from None

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        root = Path(self.p["dir"])
        for name, image in sorted(inputs.items()):
            path = root / name / f"{frame.index:06d}.png"
            ok, data = cv2.imencode(".png", image,
                                    [cv2.IMWRITE_PNG_COMPRESSION, self.p["compression"]])
            if not ok:
                raise UsageError(f"{path}: OpenCV cannot encode input '{name}' "
                                 f"({image.dtype} {image.shape}) as PNG")
            write_bytes_atomic(path, data.tobytes())
        return {}

