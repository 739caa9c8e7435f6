"""Chrome / Perfetto trace export (the JSON "Trace Event Format").

One track per thread that ran a stage (source readers, io threads, compute workers): a metadata
event ``thread_name`` names it and ``tid`` is the OS thread id. Every stage execution of every
frame is one complete event (``"ph": "X"``) named after the stage, with ``ts``/``dur`` in
microseconds from the start of the run and ``args`` = frame, op, variant, outcome. Open the file
in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..output_files import TRACE_PRODUCER, write_text_atomic
from .stats import timing_key


def trace_events(timings: list[dict], stage_ops: dict[str, str], t0_ns: int) -> list[dict]:
    """The event list for ``timings`` (see ``stats``); ``t0_ns`` becomes ts 0."""
    pid = os.getpid()
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
               "args": {"name": "cuvil-perception run"}}]
    named: set[int] = set()
    for timing in sorted(timings, key=lambda t: (t["start_ns"], t["stage"])):
        tid = timing["tid"]
        if tid not in named:
            named.add(tid)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": timing["worker"]}})
        name = timing_key(timing)
        events.append({
            "ph": "X", "name": name, "cat": stage_ops.get(timing["stage"], ""), "pid": pid,
            "tid": tid, "ts": (timing["start_ns"] - t0_ns) / 1e3,
            "dur": max(0.0, (timing["end_ns"] - timing["start_ns"]) / 1e3),
            "args": {"frame": timing["frame"], "op": stage_ops.get(timing["stage"], ""),
                     "variant": timing["variant"], "outcome": timing["outcome"]},
        })
    return events


def write_trace(path: str | Path, timings: list[dict], stage_ops: dict[str, str],
                t0_ns: int) -> Path:
    """Write the trace atomically; ``otherData.producer`` (first key) marks it as ours for the
    output-path policy."""
    doc = {"otherData": {"producer": TRACE_PRODUCER},
           "traceEvents": trace_events(timings, stage_ops, t0_ns), "displayTimeUnit": "ms"}
    return write_text_atomic(path, json.dumps(doc) + "\n")
