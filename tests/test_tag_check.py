"""The io/compute tag check: run-queue wait is not the stage's own waiting; sources are exempt."""

from __future__ import annotations

import cuvil_perception.testing.ops  # noqa: F401  (test.scripted, test.work)
from cuvil_perception.graph import parse_pipeline
from cuvil_perception.rt.frame_timing import FrameTiming
from cuvil_perception.rt.schedstat import run_delay_ns
from cuvil_perception.rt.stats import LatencyRecorder

PIPELINE = ("stages:\n  - {id: src, op: test.scripted}\n"
            "  - {id: work, op: test.work, inputs: {x: src/value}}\n")
MS = 1_000_000


def _report(stage: str, wall_ms: float, cpu_ms: float, wait_ms: float | None):
    pipeline = parse_pipeline(PIPELINE).validate()
    recorder = LatencyRecorder()
    for frame in range(10):
        wait_ns = None if wait_ms is None else int(wait_ms * MS)
        recorder.add(FrameTiming(frame, stage, frame * 100 * MS, int((frame * 100 + wall_ms) * MS),
                                 int(cpu_ms * MS), "w", 1, wait_ns=wait_ns))
    return recorder.report(pipeline.ordered())


def test_a_compute_stage_waiting_for_a_core_is_not_flagged():
    busy = _report("work", wall_ms=10, cpu_ms=4, wait_ms=6)
    assert not busy.warnings
    assert next(r for r in busy.rows if r.stage == "work").cpu_wall == 1.0


def test_a_compute_stage_blocked_off_cpu_is_flagged():
    blocked = _report("work", wall_ms=10, cpu_ms=4, wait_ms=0)
    assert len(blocked.warnings) == 1 and "tagged compute" in blocked.warnings[0]
    assert len(_report("work", wall_ms=10, cpu_ms=4, wait_ms=None).warnings) == 1


def test_sources_are_not_checked():
    """A source reads on its own thread whatever its tag: no tag advice can change that."""
    assert not _report("src", wall_ms=10, cpu_ms=10, wait_ms=0).warnings


def test_run_delay_is_the_run_queue_field_of_this_thread():
    """Field 2 of /proc/thread-self/schedstat, read between two calls, lies between them."""
    first = run_delay_ns()
    sum(i * i for i in range(200_000))
    with open("/proc/thread-self/schedstat") as fh:
        run_delay = int(fh.read().split()[1])
    assert first <= run_delay <= run_delay_ns()
