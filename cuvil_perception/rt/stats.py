"""Latency recorder: one timing per stage per frame, summarised as percentiles.

A *timing* is recorded as a ``frame_timing.FrameTiming`` and read back as its dict form (also
its JSON form in the run record)::

    {"frame": 3, "stage": "bev", "start_ns": ..., "end_ns": ..., "cpu_ns": ..., "worker":
     "cuvil-compute_0", "tid": 12345, "variant": "normal" | "degraded" | "reference",
     "outcome": "ok" | "miss"}

``start_ns``/``end_ns`` are on the run's monotonic clock; ``cpu_ns`` is ``time.thread_time_ns``
spent by the worker thread inside the call, so cpu/wall says whether a stage computes or waits;
``wait_ns`` (compute stages, when Linux provides it) is the part of the wall time the thread was
runnable but had no core (`schedstat`): the ratio is cpu / (wall - wait).
A source's timing is its ``read()`` on the read-ahead thread. End to end (``e2e``) runs from the
frame's release (its samples taken from the read-ahead queues, after ``rate`` pacing) to the end
of its last stage, sinks included; at ``rate 0`` it includes waiting behind the frames in flight.
A sink that writes on a thread of its own (``mcap`` with ``background_frames``) ends its stage
when it has queued the frame: its writes are timings of variant ``background``, summarised as
the row ``<stage>@background``, and ``e2e+background`` runs from the release until the frame's
last stage and its last background write have both ended (the time until the frame is on disk).

Tag check (``inspect --profile`` and ``run`` print it): over a run, a ``compute`` stage whose
cpu/wall ratio is below ``COMPUTE_MIN_CPU_RATIO`` (0.5) spends most of its time off-CPU (blocked
on IO, a lock or the GIL); an ``io`` stage above ``IO_MAX_CPU_RATIO`` (0.9) is really computing
and belongs on the worker pool. Time waiting for a core on a busy machine is not counted as the
stage's own waiting (``wait_ns``), and sources are not checked: a source's reads run on its own
read-ahead thread whatever its tag, so no tag would change where it runs (decoding a PNG there is
part of reading). The check needs ``TAG_CHECK_MIN_FRAMES`` timings and a mean of
``TAG_CHECK_MIN_MEAN_MS`` per frame: where a stage of about a millisecond runs cannot matter.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..graph import Source
from .frame_timing import TIMING_INTS, TIMING_TEXTS, FrameTiming
from .spool import Spool

COMPUTE_MIN_CPU_RATIO = 0.5
IO_MAX_CPU_RATIO = 0.9
TAG_CHECK_MIN_FRAMES = 5
TAG_CHECK_MIN_MEAN_MS = 2.0
E2E = "e2e"
E2E_BACKGROUND = "e2e+background"
# Timings of work beside a stage call, each its own row ``<stage>@<variant>``: a stage's numpy
# twin timed after it (``reference``) and a sink's writes on its own writer thread, off the
# frame's path (``background``, ``ops.background_writer``).
SIDE_VARIANTS = ("reference", "background")


def timing_key(timing: dict) -> str:
    """The row a timing belongs to: its stage, or ``<stage>@<variant>`` (``SIDE_VARIANTS``)."""
    variant = timing.get("variant")
    return timing["stage"] + (f"@{variant}" if variant in SIDE_VARIANTS else "")


def split_key(key: str) -> tuple[str, str]:
    """``timing_key``'s inverse: (stage, variant), ``normal`` for a plain stage row."""
    stage, _, variant = key.rpartition("@")
    return (stage, variant) if stage and variant in SIDE_VARIANTS else (key, "normal")


@dataclass
class StageStats:
    """Summary of one stage (or ``e2e``) over a run; times in ms."""

    stage: str
    op: str
    tag: str
    frames: int
    p50: float
    p90: float
    p99: float
    max: float
    cpu_wall: float | None
    misses: int
    deadline_ms: float | None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class LatencyReport:
    """Per-stage rows in pipeline order, then reference rows, then the ``e2e`` row."""

    rows: list[StageStats]
    warnings: list[str] = field(default_factory=list)

    def row(self, stage: str) -> StageStats:
        for row in self.rows:
            if row.stage == stage:
                return row
        raise KeyError(stage)

    def has(self, stage: str) -> bool:
        return any(row.stage == stage for row in self.rows)


def percentiles(values_ms) -> tuple[float, float, float, float]:
    """(p50, p90, p99, max) in ms with linear interpolation; zeros for no values."""
    if len(values_ms) == 0:
        return 0.0, 0.0, 0.0, 0.0
    array = np.asarray(values_ms, dtype=np.float64)
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return float(p50), float(p90), float(p99), float(array.max())


E2E_INTS = ("frame", "start_ns", "end_ns", "sensor_ns")


class LatencyRecorder:
    """Thread-safe collector of timings and end-to-end latencies for one run.

    ``add`` takes ``FrameTiming`` records; ``timings`` and ``e2e`` read like lists of dicts but live in ``spool.Spool`` temporary
    files, so memory does not grow with the length of a run.
    """

    def __init__(self):
        self.timings = Spool(TIMING_INTS, TIMING_TEXTS)
        self.e2e = Spool(E2E_INTS)  # {"frame", "start_ns", "end_ns"[, "sensor_ns"]}
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)
        self.last_finished = -1  # the highest frame index whose e2e is recorded

    def add(self, timing: FrameTiming) -> None:
        with self._lock:
            self.timings.append(timing.as_row())

    def add_e2e(self, frame: int, start_ns: int, end_ns: int,
                sensor_ns: int | None = None) -> None:
        """``sensor_ns``: the frame's sensor timestamp (ns since the epoch), when known."""
        entry = {"frame": frame, "start_ns": start_ns, "end_ns": end_ns}
        if sensor_ns is not None:
            entry["sensor_ns"] = int(sensor_ns)
        with self._lock:
            self.e2e.append(entry)
            self.last_finished = max(self.last_finished, frame)
            self._finished.notify_all()

    def wait_finished(self, frame: int, timeout_s: float) -> bool:
        """Block until frame ``frame`` (or a later one) has its e2e recorded, at most
        ``timeout_s``; True if it has. Frames finish in order (every stage, sinks included,
        takes them in order), and a frame shed at admission has no e2e: the next one stands in.
        """
        with self._lock:
            return self._finished.wait_for(lambda: self.last_finished >= frame, timeout_s)

    def merge(self, other: "LatencyRecorder") -> None:
        """Append another run's samples (``bench --repeat``)."""
        with self._lock:
            self.timings.extend(other.timings)
            self.e2e.extend(other.e2e)

    def report(self, stages, e2e_deadline_ms: float | None = None,
               check_tags: bool = True) -> LatencyReport:
        """Summarise per stage (``stages``: validated ``graph.Stage`` list in order)."""
        by_stage: dict[str, list[dict]] = {}
        for timing in self.timings:
            by_stage.setdefault(timing_key(timing), []).append(timing)
        rows, warnings = [], []
        for stage in stages:
            # an unresolved `auto` (the sequential executor has no deadlines) counts no misses
            deadline = stage.deadline_ms if isinstance(stage.deadline_ms, (int, float)) else None
            rows.append(_stage_row(stage.id, stage.op, stage.effective_tag,
                                   by_stage.get(stage.id, []), deadline))
            if check_tags and not _is_source(stage):
                warnings.extend(_tag_warning(rows[-1], by_stage.get(stage.id, [])))
        for variant, tag in (("reference", "compute"), ("background", "io")):
            for stage in stages:
                key = f"{stage.id}@{variant}"
                if key in by_stage:
                    rows.append(_stage_row(key, f"{stage.op} ({variant})", tag, by_stage[key],
                                           None))
        rows.append(_e2e_row(E2E, [(e["end_ns"] - e["start_ns"]) / 1e6 for e in self.e2e],
                             e2e_deadline_ms))
        background = [t for t in self.timings if t["variant"] == "background"]
        if background:
            rows.append(_e2e_row(E2E_BACKGROUND, _written_ms(self.e2e, background),
                                 e2e_deadline_ms))
        return LatencyReport(rows, warnings)


def _e2e_row(name: str, values_ms: list[float], deadline_ms: float | None) -> StageStats:
    misses = sum(1 for v in values_ms if deadline_ms is not None and v > deadline_ms)
    what = "until written" if name == E2E_BACKGROUND else ""
    return StageStats(name, what, "", len(values_ms), *percentiles(values_ms), None, misses,
                      deadline_ms)


def _written_ms(e2e, background: list[dict]) -> list[float]:
    """Per frame, from its release until its last stage *and* its last background write ended
    (ms): the frame's full latency when sinks write off its path."""
    written: dict[int, int] = {}
    for t in background:
        written[t["frame"]] = max(written.get(t["frame"], 0), t["end_ns"])
    return [(max(e["end_ns"], written.get(e["frame"], 0)) - e["start_ns"]) / 1e6 for e in e2e]


def _stage_row(stage_id: str, op: str, tag: str, timings: list[dict],
               deadline_ms: float | None) -> StageStats:
    wall_ms = [(t["end_ns"] - t["start_ns"]) / 1e6 for t in timings]
    total_wall = sum(t["end_ns"] - t["start_ns"] - t.get("wait_ns", 0) for t in timings)
    total_cpu = sum(t["cpu_ns"] for t in timings)
    ratio = min(1.0, total_cpu / total_wall) if total_wall > 0 else None
    misses = sum(1 for v in wall_ms if deadline_ms is not None and v > deadline_ms)
    return StageStats(stage_id, op, tag, len(timings), *percentiles(wall_ms), ratio, misses,
                      deadline_ms)


def _is_source(stage) -> bool:
    return getattr(stage, "op_cls", None) is not None and issubclass(stage.op_cls, Source)


def _tag_warning(row: StageStats, timings: list[dict]) -> list[str]:
    total_wall_ms = sum(t["end_ns"] - t["start_ns"] for t in timings) / 1e6
    if row.cpu_wall is None or len(timings) < TAG_CHECK_MIN_FRAMES \
            or total_wall_ms < TAG_CHECK_MIN_MEAN_MS * len(timings):
        return []
    if row.tag == "compute" and row.cpu_wall < COMPUTE_MIN_CPU_RATIO:
        return [f"stage '{row.stage}' is tagged compute but spent {row.cpu_wall:.0%} of its wall "
                f"time on the CPU (< {COMPUTE_MIN_CPU_RATIO:.0%}): it mostly waits (IO, a lock or "
                "the GIL); tag it io or release the GIL"]
    if row.tag == "io" and row.cpu_wall > IO_MAX_CPU_RATIO:
        return [f"stage '{row.stage}' is tagged io but spent {row.cpu_wall:.0%} of its wall time "
                f"on the CPU (> {IO_MAX_CPU_RATIO:.0%}): it computes; tag it compute so it runs "
                "on the worker pool"]
    return []
