"""What the kernel cache's trust checks cost on a warm start (issue 26: within 1 ms of before).

Times `prewarm` of a pipeline-sized kernel set (the model kernels when the ops are installed,
else the examples at two shapes) from a warm disk cache, with the checks (`cache_trust`: two
folder ``stat`` calls per open, entries opened ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``-ed) and
with them replaced by the path before them (the configured folder used as it is, entries read
with ``Path.read_bytes``), alternating, so both see the same machine load; then the cost of one
entry open both ways (best of batches: whole warm starts are noisy on a shared machine) times
the opens of a warm start.

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


def per_open_us(specs: list, repeats: int = 2000) -> tuple[float, float]:
    """(checked, unchecked) µs of one open of an entry: the store folder looked up and the
    entry read, best of 5 interleaved batches (robust to a busy machine, unlike whole starts)."""
    entry = next(cache.store_dir().glob("*.obj"))
    best = {True: float("inf"), False: float("inf")}
    for _ in range(5):
        for checked in (True, False):
            _use(checked)
            t0 = time.perf_counter()
            for _ in range(repeats):
                cache.read_entry(cache.store_root(cache.SUBDIR) / cache.SUBDIR / entry.name)
            best[checked] = min(best[checked], (time.perf_counter() - t0) / repeats * 1e6)
    _use(True)
    return best[True], best[False]


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
    checked_us, unchecked_us = per_open_us(specs)
    opens = 2 * len(specs)  # an alias and an entry per kernel
    before, now = statistics.median(times[False]), statistics.median(times[True])
    print_table(f"warm start of {len(specs)} kernels, median of {rounds} (interleaved)",
                ["path", "median ms", "best ms"],
                [("without trust checks (before issue 26)", before, min(times[False])),
                 ("with trust checks", now, min(times[True])),
                 ("difference (budget: 1 ms)", now - before, min(times[True]) -
                  min(times[False]))])
    print_table(f"one entry open, best of 5 x 2000; x {opens} opens per warm start",
                ["path", "us per open", "ms per warm start"],
                [("without trust checks", unchecked_us, unchecked_us * opens / 1e3),
                 ("with trust checks", checked_us, checked_us * opens / 1e3),
                 ("difference (budget: 1 ms)", checked_us - unchecked_us,
                  (checked_us - unchecked_us) * opens / 1e3)])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
