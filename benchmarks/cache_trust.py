"""What the kernel cache's trust checks cost on a warm start (issue 26: within 1 ms of before).

Times `prewarm` of a pipeline-sized kernel set (the model kernels when the ops are installed,
else the examples at two shapes) from a warm disk cache, with the checks (`cache_trust`: two
folder ``stat`` calls per open, entries opened ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``-ed) and
with them replaced by the path before them (the configured folder used as it is, entries read
with ``Path.read_bytes``), alternating, so both see the same machine load.

Run: ``python benchmarks/cache_trust.py [ROUNDS]``. Uses a temporary cache directory.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import print_table  # noqa: E402
from compile import example_set, model_set  # noqa: E402

from cuvil_perception import config  # noqa: E402
from cuvil_perception.compile import cache, prewarm, registry  # noqa: E402

_CHECKED = (cache.store_root, cache.read_entry)


def _unchecked_root(subdir: str) -> Path:
    return config.cache_dir()


def _unchecked_read(path: Path):
    try:
        return path.read_bytes(), None
    except FileNotFoundError:
        return None, None


def _use(checked: bool) -> None:
    cache.store_root, cache.read_entry = _CHECKED if checked else (_unchecked_root,
                                                                   _unchecked_read)


def _warm_start_ms(specs: list) -> float:
    registry.clear_memory()
    t0 = time.perf_counter()
    rows = prewarm(specs)
    elapsed = (time.perf_counter() - t0) * 1e3
    assert all(row.status == "hit" for row in rows), "not a warm start"
    return elapsed


def main(rounds: int) -> None:
    os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp(prefix="cuvil-bench-trust-")
    specs = model_set() or example_set()
    prewarm(specs)  # fill the cache
    times = {True: [], False: []}
    for i in range(rounds):
        for checked in ((True, False) if i % 2 else (False, True)):
            _use(checked)
            times[checked].append(_warm_start_ms(specs))
    _use(True)
    before, now = statistics.median(times[False]), statistics.median(times[True])
    print_table(f"warm start of {len(specs)} kernels, median of {rounds} (interleaved)",
                ["path", "median ms", "best ms"],
                [("without trust checks (before issue 26)", before, min(times[False])),
                 ("with trust checks", now, min(times[True])),
                 ("difference (budget: 1 ms)", now - before, min(times[True]) -
                  min(times[False]))])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
