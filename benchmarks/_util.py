"""Tiny shared helpers for the benchmark scripts: the machine header every script prints first,
repeat-and-time, a table printer, the multiply-accumulates of an ONNX network's convolutions,
and ONNX Runtime's per-node kernel times."""

from __future__ import annotations

import os
import sys

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def print_machine() -> None:
    """The header every benchmark prints before its tables: the CPU (model, ISA, cores) its
    figures are measured on, and the runtime versions they depend on. A figure without its CPU
    says nothing on another machine (int8 speed-ups and even int8 accuracy change with VNNI)."""
    from cuvil_perception.machine_info import cpu

    versions = [f"python {sys.version.split()[0]}", f"numpy {np.__version__}"]
    try:
        import onnxruntime

        versions.append(f"onnxruntime {onnxruntime.__version__}")
    except ImportError:
        pass
    load = ", load average %.1f %.1f %.1f" % os.getloadavg() if hasattr(os, "getloadavg") else ""
    print(f"CPU: {cpu().describe()}{load}; {', '.join(versions)}", flush=True)


@dataclass(frozen=True)
class Timing:
    """Per-run wall time in milliseconds over ``runs`` runs."""

    best_ms: float
    median_ms: float
    runs: int

    def __str__(self) -> str:
        return f"{self.median_ms:.3f} ms (best {self.best_ms:.3f})"


def measure(fn: Callable[[], object], runs: int = 5, number: int = 1,
            setup: Callable[[], object] | None = None) -> Timing:
    """Time ``fn`` ``runs`` times; each run calls it ``number`` times and reports the mean per
    call. ``setup`` (untimed) runs before every run."""
    samples = []
    for _ in range(runs):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) * 1e3 / number)
    return Timing(min(samples), statistics.median(samples), runs)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a table (rich if available, else aligned plain text)."""
    cells = [[_fmt(c) for c in row] for row in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(columns)]
        print(title)
        for row in [list(columns), *cells]:
            print("  ".join(c.rjust(w) if i else c.ljust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
        return
    table = Table(title=title)
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in cells:
        table.add_row(*row)
    # Piped into a file or a CI log, rich would squeeze the table into 80 columns.
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _shapes(model: onnx.ModelProto) -> dict:
    inferred = shape_inference.infer_shapes(model)
    values = list(inferred.graph.value_info) + list(inferred.graph.output) + \
        list(inferred.graph.input)
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}


def network_macs(model: onnx.ModelProto) -> int:
    """Multiply-accumulates of the Conv and ConvTranspose nodes of ``model`` (static shapes)."""
    shapes = _shapes(model)
    inits = {t.name: t for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose"):
            continue
        weight = numpy_helper.to_array(inits[node.input[1]])
        per_position = int(np.prod(weight.shape[1:]))
        if node.op_type == "Conv":  # each output value: C_in/g x kh x kw MACs
            total += int(np.prod(shapes[node.output[0]])) * per_position
        else:  # each input value feeds C_out/g x kh x kw outputs
            total += int(np.prod(shapes[node.input[0]])) * per_position
    return total


def interleaved(variants: dict, frames: list, reps: int) -> tuple[dict, dict]:
    """({name: wall ms}, {name: CPU ms of this thread}): mean over frames of the median over
    ``reps`` of fn(frame); variants alternate frame by frame inside each repetition. Everything
    timed runs on the calling thread (one ORT intra-op thread), so the CPU time is the work
    done, without the time spent waiting for a core of the shared machine."""
    wall = {name: [[] for _ in frames] for name in variants}
    cpu = {name: [[] for _ in frames] for name in variants}
    for _ in range(reps):
        for k, frame in enumerate(frames):
            for name, fn in variants.items():
                t0, c0 = time.perf_counter(), time.thread_time()
                fn(frame)
                cpu[name][k].append((time.thread_time() - c0) * 1e3)
                wall[name][k].append((time.perf_counter() - t0) * 1e3)
    summary = lambda d: {n: statistics.mean(statistics.median(s) for s in per)  # noqa: E731
                         for n, per in d.items()}
    return summary(wall), summary(cpu)


def ort_node_times(model: onnx.ModelProto, feeds: list[dict], passes: int = 3) -> dict:
    """{(op type, node name): ms per run} of ``model`` in ONNX Runtime (CPU, one intra-op
    thread, the graph optimisations a run gets), over ``passes`` passes of every feed dict,
    from ORT's profiler: the nodes as ORT runs them (fused QLinearConv, NCHWc Conv, reorders)."""
    import json
    import tempfile
    from pathlib import Path

    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="cuvil-profile-") as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        options.enable_profiling, options.profile_file_prefix = True, os.path.join(tmp, "p")
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        for _ in range(passes):
            for feed in feeds:
                session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    total: dict = defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            key = (event["args"].get("op_name", "?"), event["name"][:-len("_kernel_time")])
            total[key] += event["dur"] / 1e3
    return {key: ms / (passes * len(feeds)) for key, ms in total.items()}


def node_rows(times: dict, label: str, top: int = 12) -> list:
    """The ``top`` slowest nodes of ``ort_node_times``, then one row per op type, then the
    total, as (name, ms per run, share) table rows."""
    whole = sum(times.values())
    out = [(f"{label}: {op} {name}", ms, f"{100 * ms / whole:.0f} %")
           for (op, name), ms in sorted(times.items(), key=lambda kv: -kv[1])[:top]]
    per_op: dict = defaultdict(float)
    for (op, _), ms in times.items():
        per_op[op] += ms
    out += [(f"{label}: all {op}", ms, f"{100 * ms / whole:.0f} %")
            for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1])]
    return out + [(f"{label}: TOTAL", whole, "100 %")]
