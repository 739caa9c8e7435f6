"""The profiled process: ``python -m cuvil_perception.profile.worker SPEC_JSON``.

It loads one pipeline, runs one untimed 1-frame warm-up (imports, ONNX Runtime sessions and
kernel loading stay out of the profile: the sampler attaches after it), then answers commands on
stdin, one JSON line back on stdout for each:

- ``run``: one run of the drive as ``bench`` runs it (rate 0, deadlines not enforced, no run
  record, sinks into a scratch folder) -> ``{"frames", "wall_s", "cpu_s", "e2e_p50_ms"}``
  (``cpu_s``: this process's CPU time over the run, all threads);
- ``quit``: exit, no reply.

While it waits for a command the main thread sits in `main`'s read of stdin (``IDLE_FRAME``
without ``RUN_FRAME`` above it): the samplers count such samples as busy, so they are dropped,
as are the samples of each run's kernel prewarm and stage open and close (``SETUP_FRAMES``).

SPEC_JSON: ``{"pipeline": path, "replay": path|null, "sets": [...], "frames": int|null,
"workers": int|null, "rate": float (optional: replay pacing, 0 as fast as possible, the
default)}``. The parent has validated the same spec, so errors here are bugs.
Before anything, the process lets any process of its user ptrace it (``PR_SET_PTRACER_ANY``):
the sampler is the worker's sibling, not its parent, which Yama's ``ptrace_scope 1`` would
otherwise refuse.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
import time
from pathlib import Path

PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = ctypes.c_ulong(-1)
IDLE_FRAME = "main (cuvil_perception/profile/worker.py)"
RUN_FRAME = "run_pipeline (cuvil_perception/rt/executor.py)"
# Each run loads its kernels (prewarm), opens and closes its stages (open() runs the detectors'
# warm-up passes on a cloud that fills the pillar budget: more work than the sample drive's 8
# frames). Not per-frame work.
SETUP_FRAMES = ("prewarm_ops (cuvil_perception/rt/op_prewarm.py)",
                "open_all (cuvil_perception/rt/lifecycle.py)",
                "close_ops (cuvil_perception/rt/lifecycle.py)")


def allow_ptrace() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux, or no Yama: nothing to allow
        pass


def load(spec: dict, scratch: Path):
    """The spec's pipeline, validated, its sinks writing into ``scratch``."""
    from ..graph import apply_cli_sources, load_pipeline
    from ..rt.bench import _redirect_sinks

    pipeline = apply_cli_sources(load_pipeline(spec["pipeline"], validate=False),
                                 replay=spec.get("replay"), sets=tuple(spec.get("sets", ())))
    pipeline.validate()
    _redirect_sinks(pipeline, scratch)
    return pipeline


def main(argv: list[str]) -> int:
    global _CHANNEL
    _CHANNEL = os.fdopen(os.dup(1), "w")  # replies only: anything a stage prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    allow_ptrace()
    from .perfmap import map_path

    map_path(os.getpid()).unlink(missing_ok=True)  # a dead process's map under our pid
    from ..rt.executor import run_pipeline
    from ..rt.options import RunOptions

    spec = json.loads(argv[0])
    with tempfile.TemporaryDirectory(prefix="cuvil-profile-") as scratch:
        pipeline = load(spec, Path(scratch))

        def options(frames):
            return RunOptions(frames=frames, workers=spec.get("workers"),
                              rate=spec.get("rate", 0.0),
                              enforce_deadlines=False, write_record=False, overwrite=True)

        run_pipeline(pipeline, options(1))
        _reply({"ready": os.getpid()})
        for line in sys.stdin:
            if line.strip() == "run":
                cpu = time.process_time()
                result = run_pipeline(pipeline, options(spec.get("frames")))
                cpu = time.process_time() - cpu
                report = result.report
                _reply({"frames": result.frames, "wall_s": result.wall_s, "cpu_s": cpu,
                        "e2e_p50_ms": report.row("e2e").p50 if report.has("e2e") else None})
            elif line.strip() == "quit":
                return 0
    return 0


_CHANNEL = sys.stdout


def _reply(message: dict) -> None:
    _CHANNEL.write(json.dumps(message) + "\n")
    _CHANNEL.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
