"""Kernel-language ports against the hand-built IR kernels they replaced, side by side.

Per kernel: outputs compared (bitwise), run time (best of interleaved rounds: on a shared
machine the minimum is the least noisy estimate, and only the ratio counts), cold compile, warm disk load, and source lines (IR generator vs
kernel-language function, code lines without docstrings/comments/blank lines).
The IR versions live in benchmarks/ir_baseline/ (benchmark-only since the port).

Run: ``python benchmarks/lang_vs_ir.py`` (also part of ``benchmarks/compile.py``).
"""

from __future__ import annotations

import ast
import inspect
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_table  # noqa: E402
from ir_baseline import yolo_nms, yolo_scan  # noqa: E402

from cuvil_perception.compile import cache_clear, get_kernel, registry  # noqa: E402
from cuvil_perception.ops.yolo import kernel_nms, kernel_scan  # noqa: E402

GRIDS, NC = [(80, 80), (40, 40), (20, 20)], 80


def _scan_case(rng):
    levels = [rng.normal(-6.0, 2.0, (NC, h, w)).astype(np.float32) for h, w in GRIDS]
    table = np.array([a.ctypes.data for a in levels], np.uint64)
    anchors = sum(h * w for h, w in GRIDS)
    outs = [np.zeros(anchors, np.float32), np.zeros(anchors, np.int64)]

    def run(fn):
        n = fn(table.ctypes.data, outs[0].ctypes.data, outs[1].ctypes.data, np.float32(-1.5))
        return [n, outs[0].copy(), outs[1][:n].copy()]
    return run, levels


def _nms_case(rng):
    n = 400
    xy = rng.uniform(0, 600, (n, 2)).astype(np.float32)
    wh = rng.uniform(5, 120, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    classes = rng.integers(0, 3, n).astype(np.float32)
    work, sup, keep = np.zeros(5 * n, np.float32), np.zeros(n, np.uint8), np.zeros(300, np.int64)

    def run(fn):
        kept = fn(boxes.ctypes.data, classes.ctypes.data, n, 7680.0, 0.45, 300,
                  work.ctypes.data, sup.ctypes.data, keep.ctypes.data)
        return [kept, keep[:kept].copy()]
    return run, boxes


def cases():
    """(name, old spec, new spec, case factory, old generator, new kernel) per ported kernel."""
    return [
        ("yolo.scan", yolo_scan.scan_spec(GRIDS, NC), kernel_scan.scan_spec(GRIDS, NC),
         _scan_case, yolo_scan, kernel_scan.scan),
        ("yolo.nms", yolo_nms.nms_spec(), kernel_nms.nms_spec(), _nms_case, yolo_nms,
         kernel_nms.nms),
    ]


def code_lines(obj) -> int:
    """Lines of code of a module or kernel: no docstrings, comments, blank lines or imports."""
    target = obj.py_func if hasattr(obj, "py_func") else obj
    text = inspect.getsource(target)
    tree = ast.parse(text)
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant):
            skip.update(range(body[0].lineno, body[0].end_lineno + 1))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
    lines = text.splitlines()
    return sum(1 for k, line in enumerate(lines, 1)
               if k not in skip and line.strip() and not line.strip().startswith("#"))


def _time(fn, runs: int) -> float:
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - t0) / runs * 1e3


def _compile_times(spec) -> tuple[float, float]:
    cold, warm = [], []
    for _ in range(3):
        registry.clear_memory()
        cache_clear()
        cold.append(registry.acquire(spec).compile_ms)
        registry.clear_memory()
        t0 = time.perf_counter()
        registry.acquire(spec)
        warm.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(cold)), float(np.median(warm))


def compare(rounds: int = 15, runs: int = 40) -> list:
    """Check outputs and time each pair; prints the table and returns its rows."""
    rng = np.random.default_rng(12)
    rows = []
    for name, old_spec, new_spec, factory, old_src, new_src in cases():
        old, new = get_kernel(old_spec), get_kernel(new_spec)
        run, _keep = factory(rng)
        same = all(np.array_equal(a, b) for a, b in zip(run(old), run(new)))
        t_old, t_new = [], []
        for _ in range(rounds):  # interleaved: both see the same machine load
            t_old.append(_time(lambda: run(old), runs))
            t_new.append(_time(lambda: run(new), runs))
        cold_old, warm_old = _compile_times(old_spec)
        cold_new, warm_new = _compile_times(new_spec)
        lo, ln = code_lines(old_src), code_lines(new_src)
        mo, mn = min(t_old), min(t_new)
        rows.append((name, "yes" if same else "NO", mo, mn, mn / mo, cold_old, cold_new,
                     warm_old, warm_new, lo, ln))
    print_table("kernel language vs hand-built IR (run ms: best round, per call incl. output copies; "
                "compile ms: median of 3)",
                ["kernel", "bitwise", "IR ms", "lang ms", "lang/IR", "IR cold", "lang cold",
                 "IR warm", "lang warm", "IR lines", "lang lines"], rows)
    return rows


if __name__ == "__main__":
    import os
    import shutil
    import tempfile

    cache = tempfile.mkdtemp(prefix="cuvil-bench-cache-")
    os.environ["CUVIL_CACHE_DIR"] = cache
    try:
        compare()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
