"""A per-frame table of what a run found, read back from its jsonl output (``run --summary``).

Reading the file back (rather than keeping results in memory) shows what a user will find in it,
and proves every line parses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.table import Table

from ..eval.runlog import read_run

MAX_ROWS = 40


def frame_summary_table(jsonl_path: str | Path, max_rows: int = MAX_ROWS) -> Table | None:
    """Frame, time since the first frame, and the row count of every output whose first axis
    varies between frames (detections, boxes, fused objects...); stale outputs are marked."""
    frames = read_run(jsonl_path)
    if not frames:
        return None
    shapes: dict[str, set] = {}
    for frame in frames:
        for name, array in frame.outputs.items():
            if array is not None and array.ndim >= 1:
                shapes.setdefault(name, set()).add(array.shape[0])
    ports = [name for name, counts in shapes.items() if len(counts) > 1 or _listy(frames, name)]
    table = Table(title=f"rows per frame in {jsonl_path}")
    for column in ("frame", "t (s)", *ports):
        table.add_column(column, justify="right")
    start = frames[0].timestamp_ns
    shown = frames if len(frames) <= max_rows else frames[: max_rows - 1] + frames[-1:]
    for k, frame in enumerate(shown):
        if len(frames) > max_rows and k == max_rows - 1:
            table.add_row("…", "", *["" for _ in ports])
        cells = []
        for name in ports:
            array = frame.outputs.get(name)
            count = "-" if array is None else str(array.shape[0])
            stale = any(key.endswith(f"/{name}") for key in frame.stale)
            cells.append(f"{count} (stale)" if stale else count)
        table.add_row(str(frame.index), f"{(frame.timestamp_ns - start) / 1e9:.2f}", *cells)
    return table


def _listy(frames, name: str) -> bool:
    """A 2-D output with one row per item (e.g. [N, 6] detections), even if N never changed."""
    for frame in frames:
        array = frame.outputs.get(name)
        if isinstance(array, np.ndarray) and array.ndim == 2 and array.shape[1] <= 16:
            return True
    return False
