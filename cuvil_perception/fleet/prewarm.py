"""Prewarm the native-kernel cache of one machine (a *node*) for a fleet, before its drives run.

Every drive's run loads its kernels from the on-disk cache (~1-2 ms per module); without this
step the first drives to start on a fresh machine would all compile the same kernels at once
(~60-85 ms each, per process). A backend calls ``prewarm_node`` once per node: the local pool
in the driver process, the Ray backend as one task pinned to each node. Kernels depend on the
pipeline's static shapes, which may depend on the drive (the image size), so the prewarm uses
the first drive to run; a drive with other shapes compiles its own kernels once, into the same
cache (safe with several processes).
"""

from __future__ import annotations

import time

from ..errors import CuvilError
from .task import FleetJob, error_dict, load_job_pipeline, where


def prewarm_node(job: FleetJob, drive: str) -> dict:
    """``{"where", "kernels", "compiled", "seconds"[, "error"]}``; never raises: a failed
    prewarm only costs time (each drive's own run prewarms too, and reports what is wrong)."""
    from ..rt.lifecycle import all_ops, build_instances
    from ..rt.prewarm import prewarm_ops

    started = time.perf_counter()
    row = {"where": where(), "kernels": 0, "compiled": 0}
    try:
        pipeline = load_job_pipeline(job, drive).validate()
        kernels = prewarm_ops(all_ops(build_instances(pipeline)))
        row.update(kernels=len(kernels), compiled=sum(1 for k in kernels if not k["hit"]))
    except CuvilError as exc:
        row["error"] = error_dict(exc, retryable=False)
    except Exception as exc:  # noqa: BLE001 - the drives' own runs report what is wrong
        row["error"] = error_dict(exc, retryable=True)
    row["seconds"] = round(time.perf_counter() - started, 6)
    return row
