"""A per-frame table of what a run found, read back from its run log (``run --summary``).

Reading the file back (rather than keeping results in memory) shows what a user will find in it,
and proves every line parses. A stage whose op declares ``summary_port`` and ``summarize`` gets one
column, titled by the stage id (e.g. ``pillars: 15: 8 car, 5 pedestrian, 2 cyclist``); other
list-like outputs show their row count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from rich.table import Table

from ..eval.runlog import read_run
from ..graph import roles as R

MAX_ROWS = 40


@dataclass
class Column:
    """One column: its title, the jsonl input it reads, and how to describe a value."""

    title: str
    name: str
    describe: Callable[[np.ndarray], str] | None = None


def run_summaries(pipeline, outputs: list[dict]) -> list[Table]:
    """The ``run --summary`` tables: one per run log among the run's ``outputs`` that has a
    frame (the stages whose op has the ``run_log`` role, `graph.roles`)."""
    tables = [frame_summary_table(o["path"], summary_columns(pipeline, o["stage"]))
              for o in R.run_logs(outputs)]
    return [table for table in tables if table is not None]


def summary_columns(pipeline, sink_id: str) -> list[Column] | None:
    """Columns for the inputs of run-log stage ``sink_id``: one per summarising upstream stage (its
    ``summary_port``), the others left to ``frame_summary_table``'s row counts. None when no
    upstream op summarises."""
    columns, summarised = [], set()
    for name, ref in pipeline.stage(sink_id).inputs.items():
        op = pipeline.stage(ref.stage).make_op()  # cheap: ops do no IO before open()
        port = getattr(op, "summary_port", None)
        if port is None or not callable(getattr(op, "summarize", None)):
            continue
        summarised.add(ref.stage)
        if ref.port == port:
            columns.append(Column(ref.stage, name, lambda a, op=op, p=port: op.summarize(p, a)))
    if not columns:
        return None
    hidden = {name for name, ref in pipeline.stage(sink_id).inputs.items()
              if ref.stage in summarised}
    return columns + [Column(name, name) for name in pipeline.stage(sink_id).inputs
                      if name not in hidden]


def frame_summary_table(jsonl_path: str | Path, columns: list[Column] | None = None,
                        max_rows: int = MAX_ROWS) -> Table | None:
    """Frame, time since the first frame, then per column the described value or the row count.
    Without ``columns``: every output whose first axis varies between frames or that is a list
    of rows (detections, boxes, objects). Stale (reused) values are marked."""
    frames = read_run(jsonl_path)
    if not frames:
        return None
    first = next((f for f in frames if f.dropped is None), frames[0])
    columns = [c for c in (columns or [Column(n, n) for n in first.outputs])
               if c.describe is not None or _listy(frames, c.name)]
    table = Table(title=f"detections per frame in {jsonl_path}")
    for title in ("frame", "t (s)", *(c.title for c in columns)):
        table.add_column(title, justify="right")
    start = frames[0].timestamp_ns
    shown = frames if len(frames) <= max_rows else frames[: max_rows - 1] + frames[-1:]
    for k, frame in enumerate(shown):
        if len(frames) > max_rows and k == max_rows - 1:
            table.add_row("…", "", *["" for _ in columns])
        cells = [_cell(frame, column) for column in columns]
        table.add_row(str(frame.index), f"{(frame.timestamp_ns - start) / 1e9:.2f}", *cells)
    return table


def _cell(frame, column: Column) -> str:
    if frame.dropped is not None:
        where = frame.dropped.get("stage") or "e2e"
        return f"dropped ({where} {frame.dropped.get('reason')})"
    array = frame.outputs.get(column.name)
    if array is None:
        return "-"
    text = column.describe(array) if column.describe else str(array.shape[0])
    stale = any(key.split("/")[0] == column.title for key in frame.stale)
    return f"{text} (stale)" if stale else text


def _listy(frames, name: str) -> bool:
    """Rows of items: a first axis that varies between frames, or a 2-D [N, <=16] array."""
    lengths = set()
    for frame in frames:
        array = frame.outputs.get(name)
        if isinstance(array, np.ndarray) and array.ndim >= 1:
            lengths.add(array.shape[0])
            if array.ndim == 2 and array.shape[1] <= 16:
                return True
    return len(lengths) > 1
