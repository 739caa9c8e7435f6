"""Sink ops: ``jsonl`` (one JSON object per frame, crash-safe) and ``png`` (image files).

JSONL line schema (docs/drive-format.md has the full table)::

    {"frame": 0, "timestamp_ns": 1767268800000085957, "stamps": {"points": ..., "image": ...},
     "stale": {}, "outputs": {"<input>": {"dtype": "float32", "shape": [3, 4], "data": [...]}}}

Arrays with more than ``max_values`` elements are written without ``data`` but with ``sha256``
of their C-order bytes, so runs stay comparable without megabyte lines.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import cv2
import numpy as np

from ..errors import UsageError
from ..graph import FrameInfo, Param, ParamProblem, PortSpec, Range, RunContext, Sink, register


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
    """Append one JSON line per frame; each line goes out in a single write() so a process
    killed at any point leaves a file whose every line is a complete JSON object."""

    name = "jsonl"
    tag = "io"
    doc = "Write every connected input, per frame, as one JSON object per line."
    params = (
        Param("path", Path, Path("run.jsonl"), "output file (parent folders are created)"),
        Param("max_values", int, 4096, "larger arrays get a sha256 instead of their data",
              range=Range(0, 2**62)),
        Param("fsync", bool, False, "fsync after every line (survives power loss, slower)"),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self._fd: int | None = None

    def open(self, ctx: RunContext) -> None:
        path = Path(self.p["path"])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write JSONL output ({exc.strerror or exc})") from None

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        record = {"frame": frame.index, "timestamp_ns": int(frame.timestamp_ns),
                  "stamps": {k: int(v) for k, v in sorted(frame.stamps.items())},
                  "stale": {k: int(v) for k, v in sorted(frame.stale.items())},
                  "outputs": {name: encode_array(inputs[name], self.p["max_values"])
                              for name in sorted(inputs)}}
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        self._write(line)
        return {}

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # os.write may write less than asked; finish the line before returning
            written = os.write(self._fd, view)
            view = view[written:]
        if self.p["fsync"]:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@register
class PngSink(Sink):
    """Write each connected image input per frame as ``<dir>/<input>/<frame:06d>.png``.

    Inputs must be uint8 [H, W] (grey) or [H, W, 3] (BGR).
    """

    name = "png"
    tag = "io"
    doc = "Write image inputs as PNG files, one folder per input."
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
            for name in self.connected:
                (root / name).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{root}: cannot create PNG output folder "
                             f"({exc.strerror or exc})") from None

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


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file and a rename, so a crash never leaves half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
