"""Prewarm one machine (a *node*) for a fleet, before its drives run: kernels, and what it has.

Every drive's run loads its kernels from the on-disk cache (~1-2 ms per module); without this
step the first drives to start on a fresh machine would all compile the same kernels at once
(~60-85 ms each, per process). A backend calls ``prewarm_node`` once per node: the local pool
in the driver process, the Ray backend as one task pinned to each node. Kernels depend on the
pipeline's static shapes, which may depend on the drive (the image size), so the prewarm uses
the first drive this node can read; a drive with other shapes compiles its own kernels once,
into the same cache (safe with several processes).

The same task says what the node has, before any drive runs there: the cuvil-perception it
imports (``package_identity``: version and a digest of its source, which the Ray backend
compares with the driver's) and which of the fleet's drives it cannot read (``unreadable``:
their bytes are then shipped to it, ``transport``).
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..errors import CuvilError
from .task import FleetJob, error_dict, load_job_pipeline, where
from .transport import local_drive, readable_here


@functools.lru_cache(maxsize=1)
def package_identity() -> dict:
    """``{"version", "source"}``: the package version and a sha256 (12 hex digits) of every
    ``.py`` file of the package this process imports (same version, edited code: told apart)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return {"version": __version__, "source": digest.hexdigest()[:12]}


def prewarm_node(job: FleetJob, drives: list[str]) -> dict:
    """``{"where", "kernels", "compiled", "seconds", "version", "source", "package",
    "unreadable"[, "error"]}`` (``drives``: the locations of the drives to run; ``package``: the
    folder this node imports cuvil_perception from; ``unreadable``: the indices of the drives
    this node cannot read); never raises: a failed prewarm only costs time (each drive's
    own run prewarms too, and reports what is wrong)."""
    from ..rt.lifecycle import all_ops, build_instances
    from ..rt.op_prewarm import prewarm_ops

    started = time.perf_counter()
    unreadable = [i for i, d in enumerate(drives) if not readable_here(d)]
    row = dict(where=where(), kernels=0, compiled=0, unreadable=unreadable,
               package=str(Path(__file__).resolve().parents[1]), **package_identity())
    first = next((d for i, d in enumerate(drives) if i not in set(unreadable)), None)
    try:
        if first is None:
            raise FileNotFoundError("this node can read none of the drives (they are shipped "
                                    "to it): kernels compile with its first drive")
        with tempfile.TemporaryDirectory(prefix="cuvil-prewarm-") as tmp, \
                local_drive(first, Path(tmp)) as drive:
            pipeline = load_job_pipeline(job, drive).validate()
            kernels = prewarm_ops(all_ops(build_instances(pipeline)))
        row.update(kernels=len(kernels), compiled=sum(1 for k in kernels if not k["hit"]))
    except CuvilError as exc:
        row["error"] = error_dict(exc, retryable=False)
    except Exception as exc:  # noqa: BLE001 - the drives' own runs report what is wrong
        row["error"] = error_dict(exc, retryable=True)
    row["seconds"] = round(time.perf_counter() - started, 6)
    return row

