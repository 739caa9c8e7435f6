"""Latency samples of one drive in a compact, JSON-able form, and back to ``rt`` objects.

A drive's results row keeps every raw sample (so the fleet can pool them: percentiles of the
union of the drives' frames, never a mean of percentiles)::

    {"stages": [{"id", "op", "tag", "deadline_ms"}, ...],    # the stages, in pipeline order
     "e2e_deadline_ms": float | null,
     "wall_ns": {"bev": [..], "bev@reference": [..]},          # per frame, run order
     "cpu_ns": {"bev": [..], ...},
     "e2e_ns": [..]}

``recorder(samples)`` rebuilds an ``rt.LatencyRecorder`` from one or several of these, and
``report(samples)`` the ``rt.LatencyReport`` that ``rt`` itself would print for those frames.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..rt import LatencyRecorder, LatencyReport
from ..rt.frame_timing import FrameTiming
from ..rt.stats import split_key, timing_key



@dataclass(frozen=True)
class StageInfo:
    """What ``LatencyRecorder.report`` reads of a stage (the ``graph.Stage`` fields)."""

    id: str
    op: str
    effective_tag: str
    deadline_ms: float | None


def compact(recorder: LatencyRecorder, stages, e2e_deadline_ms: float | None) -> dict:
    """The samples of ``recorder`` (stages: the run's ``graph.Stage`` list, in order)."""
    wall: dict[str, list[int]] = {}
    cpu: dict[str, list[int]] = {}
    for timing in recorder.timings:
        key = timing_key(timing)
        wall.setdefault(key, []).append(int(timing["end_ns"] - timing["start_ns"]))
        cpu.setdefault(key, []).append(int(timing["cpu_ns"]))
    return {"stages": [{"id": s.id, "op": s.op, "tag": s.effective_tag,
                        "deadline_ms": s.deadline_ms} for s in stages],
            "e2e_deadline_ms": e2e_deadline_ms, "wall_ns": wall, "cpu_ns": cpu,
            "e2e_ns": [int(e["end_ns"] - e["start_ns"]) for e in recorder.e2e]}


def recorder(samples: list[dict]) -> LatencyRecorder:
    """One recorder holding the samples of every entry of ``samples``, in order."""
    out = LatencyRecorder()
    for entry in samples:
        for key, walls in entry["wall_ns"].items():
            stage, variant = split_key(key)
            for frame, (wall, cpu) in enumerate(zip(walls, entry["cpu_ns"][key])):
                out.add(FrameTiming(frame, stage, 0, int(wall), int(cpu), variant=variant))
        for frame, value in enumerate(entry["e2e_ns"]):
            out.add_e2e(frame, 0, int(value))
    return out


def stage_infos(entry: dict) -> list[StageInfo]:
    return [StageInfo(s["id"], s["op"], s["tag"], s["deadline_ms"]) for s in entry["stages"]]


def report(samples: list[dict]) -> LatencyReport:
    """The latency table over every entry of ``samples`` (the stages of the first entry)."""
    first = samples[0]
    return recorder(samples).report(stage_infos(first), first["e2e_deadline_ms"],
                                    check_tags=False)
