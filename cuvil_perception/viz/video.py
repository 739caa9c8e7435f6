"""Compose per-frame panels and write them as an MP4 (OpenCV ``VideoWriter``, codec mp4v)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..errors import UsageError

FOURCC = "mp4v"


def compose(camera: np.ndarray, *panels: np.ndarray) -> np.ndarray:
    """One video frame: the camera image on top, each panel (BEV, 3D view) below it scaled to
    the same width. All uint8 BGR; the result's width and height are even (players need it)."""
    parts = [camera]
    width = camera.shape[1]
    for panel in panels:
        height = max(1, int(round(panel.shape[0] * width / panel.shape[1])))
        parts.append(cv2.resize(panel, (width, height), interpolation=cv2.INTER_AREA))
    frame = np.concatenate(parts, axis=0)
    even_h, even_w = frame.shape[0] - frame.shape[0] % 2, frame.shape[1] - frame.shape[1] % 2
    return np.ascontiguousarray(frame[:even_h, :even_w])


class Mp4Writer:
    """Append same-sized BGR frames to an MP4; ``close()`` finalises the file.

    The size is fixed by the first frame; UsageError when OpenCV cannot open the file for writing.
    """

    def __init__(self, path: str | Path, fps: float = 10.0):
        self.path = Path(path)
        self.fps = fps
        self.frames = 0
        self._writer = None
        self._size: tuple[int, int] | None = None

    def write(self, frame: np.ndarray) -> None:
        size = (frame.shape[1], frame.shape[0])
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*FOURCC),
                                           self.fps, size)
            if not self._writer.isOpened():
                raise UsageError(f"{self.path}: OpenCV cannot write an {FOURCC} MP4 there")
            self._size = size
        if size != self._size:
            raise ValueError(f"frame size {size} differs from the video's {self._size}")
        self._writer.write(frame)
        self.frames += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    def __enter__(self) -> "Mp4Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
