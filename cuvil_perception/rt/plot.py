"""PNG plots of a run's latencies, drawn with OpenCV (no matplotlib dependency).

* ``latency_histogram.png``: one panel per stage (and ``e2e``): a 30-bin histogram of wall time
  per frame (ms), with p50 (green) and p99 (red) marked, and the deadline (orange) if any.
* ``timeline.png``: a per-frame timeline (Gantt): one row per stage, one box per execution from
  its start to its end on the run clock (ms), colour cycling with the frame index; a red outline
  marks a deadline miss.
"""

from __future__ import annotations

from pathlib import Path

import cv2

from ..output_files import mark_folder, write_bytes_atomic
import numpy as np

from .stats import E2E, E2E_BACKGROUND, LatencyReport, timing_key

_W, _PANEL_H, _MARGIN = 900, 150, 60
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_PALETTE = [(180, 119, 31), (14, 127, 255), (44, 160, 44), (189, 103, 148), (75, 86, 140),
            (194, 119, 227), (127, 127, 127), (34, 189, 188), (207, 190, 23)]


def write_plots(directory: str | Path, recorder, report: LatencyReport,
                timeline_recorder=None) -> list[Path]:
    """Write both PNGs into ``directory`` (created) and return their paths.

    ``recorder`` feeds the histograms (e.g. several runs pooled); the timeline shows
    ``timeline_recorder`` (one run; default ``recorder``), since pooled runs share no clock.
    """
    directory = Path(directory)
    mark_folder(directory, "bench --plot")
    hist = directory / "latency_histogram.png"
    timeline = directory / "timeline.png"
    _write(hist, histogram_image(recorder, report))
    _write(timeline, timeline_image(timeline_recorder or recorder, report))
    return [hist, timeline]


def _write(path: Path, image: np.ndarray) -> None:
    ok, data = cv2.imencode(".png", image)
    if not ok:
        raise OSError(f"cannot encode {path}")
    write_bytes_atomic(path, data.tobytes())


def _samples(recorder) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for t in recorder.timings:
        out.setdefault(timing_key(t), []).append((t["end_ns"] - t["start_ns"]) / 1e6)
    out[E2E] = [(e["end_ns"] - e["start_ns"]) / 1e6 for e in recorder.e2e]
    return out


def histogram_image(recorder, report: LatencyReport) -> np.ndarray:
    """uint8 BGR image [(rows) * 150, 900, 3]."""
    samples = _samples(recorder)
    rows = [r for r in report.rows if samples.get(r.stage)]
    image = np.full((max(1, len(rows)) * _PANEL_H, _W, 3), 255, np.uint8)
    for i, row in enumerate(rows):
        _histogram_panel(image[i * _PANEL_H:(i + 1) * _PANEL_H], row, samples[row.stage])
    return image


def _histogram_panel(panel: np.ndarray, row, values: list[float]) -> None:
    left, right, top, bottom = _MARGIN + 100, _W - 20, 25, _PANEL_H - 30
    top_ms = max(max(values), row.deadline_ms or 0.0) * 1.05 or 1.0
    counts, edges = np.histogram(values, bins=30, range=(0.0, top_ms))
    peak = max(1, counts.max())

    def x_of(ms: float) -> int:
        return int(left + (right - left) * ms / top_ms)

    for count, lo, hi in zip(counts, edges[:-1], edges[1:]):
        height = int((bottom - top) * count / peak)
        cv2.rectangle(panel, (x_of(lo), bottom - height), (max(x_of(lo), x_of(hi) - 1), bottom),
                      (180, 119, 31), -1)
    cv2.line(panel, (left, bottom), (right, bottom), (0, 0, 0), 1)
    for ms, colour in ((row.p50, (44, 160, 44)), (row.p99, (40, 39, 214)),
                       (row.deadline_ms, (14, 127, 255))):
        if ms is not None:
            cv2.line(panel, (x_of(ms), top), (x_of(ms), bottom), colour, 2)
    cv2.putText(panel, row.stage[:18], (8, 50), _FONT, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    label = f"p50 {row.p50:.2f}  p99 {row.p99:.2f}  max {row.max:.2f} ms  n={len(values)}"
    cv2.putText(panel, label, (left, 18), _FONT, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    for frac in (0.0, 0.5, 1.0):
        cv2.putText(panel, f"{top_ms * frac:.2f}", (x_of(top_ms * frac) - 12, bottom + 18), _FONT,
                    0.4, (60, 60, 60), 1, cv2.LINE_AA)


def timeline_image(recorder, report: LatencyReport) -> np.ndarray:
    """uint8 BGR image: one 28-px row per stage, time (ms) on x."""
    stages = [r.stage for r in report.rows if r.stage not in (E2E, E2E_BACKGROUND)]
    row_h, left, right = 28, 170, _W * 2 - 20
    image = np.full((len(stages) * row_h + 60, _W * 2, 3), 255, np.uint8)
    timings = recorder.timings
    if not timings:
        return image
    t_min = min(t["start_ns"] for t in timings)
    span = max(1, max(t["end_ns"] for t in timings) - t_min)

    def x_of(ns: int) -> int:
        return int(left + (right - left) * (ns - t_min) / span)

    for i, stage in enumerate(stages):
        y = 20 + i * row_h
        cv2.putText(image, stage[:20], (8, y + 18), _FONT, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
        for t in timings:
            if timing_key(t) != stage:
                continue
            x0, x1 = x_of(t["start_ns"]), max(x_of(t["start_ns"]) + 1, x_of(t["end_ns"]))
            cv2.rectangle(image, (x0, y + 3), (x1, y + row_h - 3),
                          _PALETTE[t["frame"] % len(_PALETTE)], -1)
            if t["outcome"] != "ok":
                cv2.rectangle(image, (x0, y + 3), (x1, y + row_h - 3), (40, 39, 214), 2)
    _time_axis(image, 20 + len(stages) * row_h + 5, left, right, span)
    return image


def _time_axis(image: np.ndarray, y: int, left: int, right: int, span_ns: int) -> None:
    """Ticks at a round step (1, 2 or 5 x 10^k ms) under the timeline."""
    span_ms = span_ns / 1e6
    step = 10 ** np.floor(np.log10(max(span_ms, 1e-3) / 10))
    step *= next(f for f in (1, 2, 5, 10) if span_ms / (step * f) <= 12)
    cv2.line(image, (left, y), (right, y), (0, 0, 0), 1)
    for i in range(int(span_ms / step) + 1):
        x = int(left + (right - left) * i * step / span_ms)
        cv2.line(image, (x, y), (x, y + 5), (0, 0, 0), 1)
        cv2.putText(image, f"{i * step:g} ms", (x - 12, y + 22), _FONT, 0.4, (60, 60, 60), 1,
                    cv2.LINE_AA)


def write_ab_plot(directory: str | Path, a, b, labels: tuple[str, str]) -> Path:
    """``bench --vs --plot``: ``ab_histogram.png``, A's histograms (left) beside B's (right),
    one panel row per stage, both titled; ``a``/``b`` are `bench.Side` s."""
    directory = Path(directory)
    mark_folder(directory, "bench --plot")
    images = []
    for name, label, side in (("A", labels[0], a), ("B", labels[1], b)):
        hist = histogram_image(side.recorder, side.report)
        title = np.full((30, _W, 3), 255, np.uint8)
        cv2.putText(title, f"{name}: {label}"[:100], (8, 21), _FONT, 0.6, (0, 0, 0), 1,
                    cv2.LINE_AA)
        images.append(np.vstack([title, hist]))
    height = max(i.shape[0] for i in images)
    images = [np.vstack([i, np.full((height - i.shape[0], _W, 3), 255, np.uint8)])
              for i in images]
    path = directory / "ab_histogram.png"
    _write(path, np.hstack([images[0], np.zeros((height, 2, 3), np.uint8), images[1]]))
    return path
