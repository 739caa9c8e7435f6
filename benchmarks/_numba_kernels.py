"""The project's native kernels beside numba twins of the same algorithms (benchmark only;
see vs_numba.py): ``project_cases(scans)`` gives one vs_numba.Case per kernel."""

from __future__ import annotations

import numpy as np


def _pillarize_case(scans):
    from vs_numba import Case

    import _numba_pillarize as nk
    from cuvil_perception.ops.pillars import native
    from cuvil_perception.ops.pillars.config import PillarConfig

    ours, state = native.PillarizeKernel(PillarConfig()).open(), nk.make_state()

    def run_ours(pts):
        out = ours(pts)
        count = int(out.counts[0])
        return [count, out.voxels[:count], out.num_points[:count]]

    def run_numba(pts):
        count = nk.run(pts, state)
        return [count, state[0][:count], state[1][:count]]
    return Case("pillars.pillarize", scans, run_ours, run_numba)


def project_cases(scans) -> list:
    return [_pillarize_case(scans)]
