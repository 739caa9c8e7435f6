"""Calibration data for static INT8 quantisation: frames of a drive through a detector's own
pre-processing, as ONNX Runtime's ``CalibrationDataReader`` wants them.

``ort_inputs`` is the function that decides what the calibrated network sees for one drive
frame — exactly what the op gives ONNX Runtime at run time:

* YOLOv8: the letterboxed, normalised camera image (``YoloV8.ort_inputs``), fed to the whole
  export (the head nodes after the trunk are left in float, so they only pass values through);
* PointPillars: the network the sparse path runs (``PointPillars.ort_inputs``): the fused
  scatter + first layer's output map for a LiDAR scan, computed by the native pillarize / PFN /
  fused conv kernels (the dense scatter output for a model whose first layer does not fit).

Frames are taken evenly over the drive (``frame_indices``), so a calibration of N frames sees
the whole drive rather than its first seconds.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
from onnxruntime.quantization import CalibrationDataReader

from ..drives import Drive, DriveFrame
from ..errors import UsageError


def frame_indices(total: int, wanted: int) -> list[int]:
    """``wanted`` frame indices spread evenly over ``total`` frames (all when fewer)."""
    if total < 1:
        raise UsageError("the calibration drive has no frames")
    if wanted >= total:
        return list(range(total))
    return sorted({int(round(i)) for i in np.linspace(0, total - 1, wanted)})


class DriveFrames(CalibrationDataReader):
    """``get_next()`` -> the network inputs of the next calibration frame, None at the end.

    ``inputs_of(frame: DriveFrame) -> {input name: float32 array}`` is the op's pre-processing
    (``ort_inputs`` of the loaded model); ``progress(done, total)`` is called after each frame.
    """

    def __init__(self, drive: Drive, indices: list[int],
                 inputs_of: Callable[[DriveFrame], dict], progress=None):
        self.drive = drive
        self.indices = list(indices)
        self.inputs_of = inputs_of
        self.progress = progress
        self._next: Iterator[int] = iter(self.indices)
        self.done = 0

    def get_next(self) -> dict | None:
        index = next(self._next, None)
        if index is None:
            return None
        feed = {name: np.ascontiguousarray(value, np.float32)
                for name, value in self.inputs_of(self.drive.read(index)).items()}
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, len(self.indices))
        return feed

    def rewind(self) -> None:
        self._next = iter(self.indices)
        self.done = 0
