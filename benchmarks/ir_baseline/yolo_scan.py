"""The hand-built IR ``yolo.scan`` that ``cuvil_perception/ops/yolo/kernel_scan.py`` replaced
(same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec
from . import _ir as u


def build_scan(module: ir.Module, fn_name: str, *, grids: list, nc: int) -> None:
    """Define the scan kernel for levels ``grids`` ([[h, w], ...]) and ``nc`` classes."""
    fn = ir.Function(module, ir.FunctionType(u.I64, [u.PTR, u.PTR, u.PTR, u.F32]), name=fn_name)
    cls_table, best, cand, threshold = fn.args
    for arg in (cls_table, best, cand):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    count = u.entry_alloca(b, u.I64, "count", init=u.const_i64(0))
    offset = 0
    for level, (h, w) in enumerate(grids):
        hw = h * w
        logits = b.load(u.gep(b, cls_table, level, u.PTR), typ=u.PTR, name=f"cls{level}")
        row_max = u.gep(b, best, offset, u.F32, name=f"best{level}")
        _level_max(b, logits, row_max, hw, nc)
        _compact(b, row_max, hw, offset, threshold, cand, count)
        offset += hw
    b.ret(b.load(count, typ=u.I64))


def _level_max(b: ir.IRBuilder, logits: ir.Value, row_max: ir.Value, hw: int, nc: int) -> None:
    """row_max[p] = max over classes c of logits[c * hw + p]."""
    with u.for_range(b, 0, hw, name="p0") as p:
        u.store_at(b, u.load_at(b, logits, p, u.F32), row_max, p)
    with u.for_range(b, 1, nc, name="c") as c:
        row = u.gep(b, logits, b.mul(c, u.const_i64(hw)), u.F32)
        with u.for_range(b, 0, hw, name="p") as p:
            value = u.load_at(b, row, p, u.F32)
            current = u.load_at(b, row_max, p, u.F32)
            bigger = b.fcmp_ordered(">", value, current)
            u.store_at(b, b.select(bigger, value, current), row_max, p)


def _compact(b: ir.IRBuilder, row_max: ir.Value, hw: int, offset: int, threshold: ir.Value,
             cand: ir.Value, count: ir.Value) -> None:
    """Append offset + p to cand for every p with row_max[p] > threshold (branch-free)."""
    with u.for_range(b, 0, hw, name="q") as p:
        n = b.load(count, typ=u.I64)
        u.store_at(b, b.add(p, u.const_i64(offset)), cand, n)
        passed = b.fcmp_ordered(">", u.load_at(b, row_max, p, u.F32), threshold)
        b.store(b.add(n, b.zext(passed, u.I64)), count)


def scan_spec(grids, nc: int) -> KernelSpec:
    """The ``yolo.scan`` kernel for these level grids ((h, w) per level) and class count."""
    return KernelSpec(name="yolo.scan", build=build_scan,
                      static={"grids": [list(map(int, g)) for g in grids], "nc": int(nc)},
                      args=("ptr", "ptr", "ptr", "f32"), ret="i64", fastmath=(), version=1)
