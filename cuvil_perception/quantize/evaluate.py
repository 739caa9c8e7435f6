"""What an INT8 file costs and gains on this machine: AP of the fp32 and int8 models on a
labelled drive, and their speed, measured side by side (``quantize --evaluate DRIVE``).

``score_models`` runs several files of one detector over the same frames, interleaved: on each
frame every model detects once, the order rotating frame by frame (so no model always runs on a
cache the previous one warmed), after one untimed warm pass each on the first frame. A model is
the op's own class (``YoloV8`` / ``PointPillars``, ONNX Runtime, one thread, native head
kernels), so the figures are the detector stage's, without the pipeline around it.

Scores: 2D AP for YOLOv8 (image boxes), rotated BEV AP for PointPillars (objects outside the
grid's x/y range ignored), IoU >= 0.5, all-point interpolation, as ``eval`` scores the stage.
Times: CPU time of the calling thread per ``detect`` call (ONNX Runtime with one thread runs on
it), in ms: the ratio of medians is the speed ratio, robust to other processes sharing the cores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..drives import Drive
from ..errors import DriveError, UsageError
from ..eval.ap import ClassAP, mean_ap
from ..eval.scoring import score_2d, score_bev

METRIC = {"yolo": "2d", "pillars": "bev"}


@dataclass
class ModelScore:
    """One model over the drive: ``classes`` (AP per class), ``cpu_ms`` per frame (float64
    [frames], thread CPU time of ``detect``)."""

    path: Path
    classes: list[ClassAP]
    cpu_ms: np.ndarray

    @property
    def mean_ap(self) -> float:
        return mean_ap(self.classes)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.cpu_ms))


@dataclass
class Gap:
    """fp32 vs int8 on one drive: ``metric`` "2d" or "bev", ``frames`` scored."""

    kind: str
    metric: str
    frames: int
    fp32: ModelScore
    int8: ModelScore

    @property
    def ap_change(self) -> float:
        """int8 mean AP - fp32 mean AP (negative: int8 loses)."""
        return self.int8.mean_ap - self.fp32.mean_ap

    @property
    def speedup(self) -> float:
        """fp32 median CPU ms / int8 median CPU ms (> 1: int8 is faster)."""
        return self.fp32.median_ms / self.int8.median_ms


def labelled_drive(path: str, what: str) -> Drive:
    """The drive at ``path``; UsageError naming ``what`` (the option) and the path unless it is
    a drive folder with frames and labels."""
    if not str(path).strip() or not Path(path).is_dir():
        raise UsageError(f"{what} {path!r}: no such drive folder")
    try:
        drive = Drive(Path(path))
    except DriveError as exc:
        raise UsageError(f"{what} {path}: {exc}") from None
    if len(drive) < 1:
        raise UsageError(f"{what} {path}: the drive has no frames")
    if not drive.has_labels:
        raise UsageError(f"{what} {path}: the drive has no labels to score against "
                         "(make-drive writes them; a KITTI raw drive has none)")
    return drive


def compare_int8(kind: str, fp32: Path, int8: Path, drive: Drive, frames: int | None = None,
                 progress=None) -> Gap:
    """The AP gap and speed ratio of ``int8`` against ``fp32`` (both ``kind`` models)."""
    base, quantized = score_models(kind, [fp32, int8], drive, frames, progress)
    return Gap(kind, METRIC[kind], min(frames or len(drive), len(drive)), base, quantized)


def score_models(kind: str, paths: list[Path], drive: Drive, frames: int | None = None,
                 progress=None) -> list[ModelScore]:
    """Each model of ``paths`` over the first ``frames`` frames of ``drive`` (all: None),
    interleaved; ``progress(done, total)`` after each frame."""
    loaded = [_load(kind, Path(p)) for p in paths]
    models = [detect for detect, _ in loaded]
    total = min(frames or len(drive), len(drive))
    outputs = [[] for _ in models]
    cpu_ms = np.zeros((len(models), total))
    first = drive.read(0)
    for model in models:  # warm pass: kernels loaded, ORT's first-run allocations made
        model(first)
    for index in range(total):
        frame = drive.read(index)
        for k in range(len(models)):
            which = (index + k) % len(models)
            start = time.thread_time_ns()
            result = models[which](frame)
            cpu_ms[which, index] = (time.thread_time_ns() - start) / 1e6
            outputs[which].append(result + (frame.labels,))
        if progress is not None:
            progress(index + 1, total)
    return [ModelScore(Path(p), _score(kind, out, xy_range), cpu_ms[i])
            for i, (p, out, (_, xy_range)) in enumerate(zip(paths, outputs, loaded))]


def _load(kind: str, path: Path):
    """(frame -> detections tuple without the labels, the BEV x/y range or None) of a file."""
    if kind == "yolo":
        from ..ops.yolo.model import YoloV8

        yolo = YoloV8.from_onnx(path, runtime="onnxruntime", threads=1)
        yolo.open()
        return (lambda frame: (yolo.detect(frame.image),)), None
    from ..ops.pillars.model import PointPillars

    pillars = PointPillars.from_onnx(path, runtime="onnxruntime", threads=1).open()
    x0, y0, _, x1, y1, _ = pillars.config.point_cloud_range
    return (lambda frame: pillars.detect(frame.points)), (x0, y0, x1, y1)


def _score(kind: str, outputs: list[tuple], xy_range) -> list[ClassAP]:
    if kind == "yolo":
        return score_2d(outputs)
    return score_bev(outputs, xy_range=xy_range)
