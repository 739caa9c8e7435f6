"""Where a run's threads go, so the networks, the compute pool and the io threads do not fight
over the same cores.

The compute pool has ``workers`` threads (default: one per core this process may use), so up to
``workers`` compute stages run at once. An ONNX network inside a stage gets
``cores // workers`` intra-op threads (at least 1), as do a kernel's ``prange`` loops called from
the stage (``compile.lang.parallel``), one inter-op thread and no spin-waiting
(``ops.onnx_runner``): with the default pool that is one thread per network, so two detectors on
two cores each own one core instead of four runtime threads time-slicing two cores; with
``--workers 1`` the single stage running at a time may use every core. Sources and io stages
block on the outside world and are left to the OS scheduler unless the pipeline's ``rt:`` block
pins them (``cpu_affinity``). ``run`` prints the chosen placement, one line per stage, with the
stage's deadline and, for ``deadline_ms: auto``, how it was obtained (``deadlines``); after the
run a ``threads:`` line (``thread_ledger``): which knobs took effect on which threads.
OpenCV's own thread pool (the letterbox resize, image decoding) gets the same share for the run
(``opencv_threads``): its pool threads are not executor threads, so they run without the rt
knobs (SCHED_FIFO), and a parallel resize waits for its slowest chunk; on the 2-core AMD EPYC
Zen 4 (AVX-512 VNNI) dev VM the camera frame's resize took 0.75 ms with OpenCV's 2 threads and
0.60 ms on the calling thread alone.
"""

from __future__ import annotations

from contextlib import contextmanager

from .lifecycle import is_source


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask, else the machine's count)."""
    from ..compile.lang.parallel import usable_cpus  # (one definition: prange's default)

    return usable_cpus()


def intra_op_threads(workers: int, cores: int | None = None) -> int:
    """Intra-op threads for each network: its share of the cores when ``workers`` stages may
    compute at once."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores // max(1, workers))


@contextmanager
def opencv_threads(threads: int):
    """OpenCV's thread count set to ``threads`` for the block (process-wide), then restored."""
    import cv2

    previous = cv2.getNumThreads()
    cv2.setNumThreads(threads)
    try:
        yield
    finally:
        cv2.setNumThreads(previous)


def placement_lines(pipeline, instances, workers: int, knobs, threads: int,
                    deadlines: dict | None = None) -> list[str]:
    """A header line, then one line per stage: its thread group, where it runs, its deadline
    (``deadlines``: stage id -> ``deadlines.Deadline``) and what the op reports about its own
    runtime (``placement()``, e.g. a network's ONNX session)."""
    stages = pipeline.ordered()
    io = sum(1 for s in stages if s.effective_tag == "io")
    lines = [f"{usable_cores()} core(s): compute pool of {workers} worker(s), {io} io thread(s), "
             f"{threads} intra-op thread(s) per network and per kernel prange loop"]
    if knobs.fifo_priority is not None:  # asked for; what took effect: the "threads:" line
        lines[0] += f"; SCHED_FIFO priority {knobs.fifo_priority} (executor threads, scheduler)"
    if knobs.deadline is not None:
        lines[0] += f"; SCHED_DEADLINE {knobs.deadline.describe()} (executor threads)"
    width = max(len(s.id) for s in stages)
    for stage in stages:
        group = "io" if is_source(stage) or stage.effective_tag == "io" else "compute"
        if is_source(stage):
            where = f"reader thread cuvil-io-{stage.id}"
        elif group == "io":
            where = f"own thread cuvil-io-{stage.id}"
        else:
            where = f"compute pool ({workers} worker(s))"
        cpus = knobs.affinity.get(group)
        if cpus:
            where += f", CPUs {','.join(str(c) for c in cpus)}"
        deadline = (deadlines or {}).get(stage.id)
        describe = getattr(instances[stage.id]["normal"], "placement", None)
        notes = [deadline.describe()] if deadline is not None else []
        notes += [describe()] if callable(describe) and describe() else []
        lines.append(f"{stage.id:<{width}}  {group:<7}  {where}"
                     + "".join(f"; {note}" for note in notes))
    return lines
