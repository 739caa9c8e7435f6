"""Warm start of ``kernel(...)`` (issue 28, item 5): the first call of a kernel whose object is
in the disk cache, in a fresh process, median over fresh processes.

A user module with a four-array kernel (`_MODULE`) is written to a temporary folder with its
own cache folder (``CUVIL_CACHE_DIR``); one process compiles it (cold), then each of ROUNDS
fresh processes times, after ``import numpy, cuvil_perception``:

- ``import``: ``from cuvil_perception.compile.lang import ...`` and the user module (llvmlite,
  the kernel language, the decorator) -- paid once per process whatever the kernels;
- ``first call``: the first ``kernel(...)`` to its return (source digests, cache lookup, object
  load, the dispatch entry) -- the figure the issue's 5 ms target is about;
- ``first call, CPU time``: the same in this process's CPU time (``time.process_time``), which
  other processes on a shared machine disturb less than the wall clock;
- ``second call``: the next call (the dispatch entry).

Each child checks that nothing was compiled. Run: ``python benchmarks/warm_start.py [ROUNDS]
[--against ROOT]``; with ``--against`` the package under ROOT (another checkout, e.g.
``git archive COMMIT | tar -x -C ROOT``) is measured too, alternating process by process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_machine, print_table  # noqa: E402

_MODULE = '''
from cuvil_perception.compile.lang import Buf, f32, kernel


@kernel(name="warm_start_bench.axpy4")
def axpy4(a: Buf[f32, "n"], b: Buf[f32, "n"], c: Buf[f32, "n"], d: Buf[f32, "n", 4], s: f32,
          *, n: int):
    for i in range(n):
        d[i, 0] += s * a[i] + b[i] * c[i]
'''

_CHILD = '''
import json, time
import numpy as np
import cuvil_perception
t0 = time.perf_counter()
from cuvil_perception.compile import compile_stats
import warm_user
t1 = time.perf_counter()
arrays = [np.ones(256, np.float32) for _ in range(3)] + [np.zeros((256, 4), np.float32)]
t2, c2 = time.perf_counter(), time.process_time()
warm_user.axpy4(*arrays, 2.0, n=256)
t3, c3 = time.perf_counter(), time.process_time()
warm_user.axpy4(*arrays, 2.0, n=256)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t3 - t2, "cpu": c3 - c2, "second": t4 - t3,
                  "compiles": compile_stats().compiles, "value": float(arrays[3][0, 0])}))
'''


def child(folder: Path, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=folder, env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(rounds: int = 10, against: str | None = None) -> None:
    """``against``: the root of another checkout of the package (e.g. ``git archive`` of an
    older commit), measured interleaved with this one, process by process, so that the load
    of a shared machine falls on both alike and their ratio means something."""
    print_machine()
    roots = {"this": Path(__file__).resolve().parents[1]}
    if against:
        roots["against"] = Path(against).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "warm_user.py").write_text(textwrap.dedent(_MODULE))
        envs = {name: {**os.environ, "CUVIL_CACHE_DIR": str(folder / f"cache-{name}"),
                       "PYTHONPATH": os.pathsep.join([str(folder), str(root)])}
                for name, root in roots.items()}
        cold = {name: child(folder, env) for name, env in envs.items()}
        runs: dict[str, list[dict]] = {name: [] for name in roots}
        for _ in range(rounds):
            for name, env in envs.items():
                runs[name].append(child(folder, env))
    everything = [r for rs in runs.values() for r in rs] + list(cold.values())
    if any(r["compiles"] for rs in runs.values() for r in rs) \
            or len({r["value"] for r in everything}) != 1:
        raise SystemExit(f"a warm process compiled, or results differ: {runs}")
    columns = ("import", "first", "cpu", "second")
    rows = []
    for name in roots:
        label = "" if len(roots) == 1 else f"{name}: "
        rows.append([f"{label}cold (compiles)", *(f"{cold[name][k] * 1e3:.2f}" for k in columns)])
        for stat, pick in (("median", statistics.median), ("min", min), ("max", max)):
            rows.append([f"{label}warm, {stat} of {rounds}",
                         *(f"{pick(r[k] for r in runs[name]) * 1e3:.2f}" for k in columns)])
    print_table("kernel(...) in a fresh process, ms (after import numpy, cuvil_perception)",
                ["process", "import kernel language + module", "first call",
                 "first call, CPU time", "second call"],
                rows)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    args = sys.argv[1:]
    other = None
    if "--against" in args:
        at = args.index("--against")
        other = args[at + 1]
        del args[at:at + 2]
    main(int(args[0]) if args else 10, other)
