"""The hand-built IR ``yolo.nms`` that ``cuvil_perception/ops/yolo/kernel_nms.py`` replaced
(same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec
from . import _ir as u


def build_nms(module: ir.Module, fn_name: str) -> None:
    """Define the NMS kernel (no static parameters: every size is a runtime argument)."""
    args = [u.PTR, u.PTR, u.I64, u.F32, u.F64, u.I64, u.PTR, u.PTR, u.PTR]
    fn = ir.Function(module, ir.FunctionType(u.I64, args), name=fn_name)
    boxes, classes, n, class_offset, iou, max_det, work, suppressed, keep = fn.args
    for arg in (boxes, classes, work, suppressed, keep):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    cols = [u.gep(b, work, b.mul(n, u.const_i64(k)), u.F32) for k in range(5)]
    _shift_boxes(b, boxes, classes, n, class_offset, cols, suppressed)
    kept = u.entry_alloca(b, u.I64, "kept", init=u.const_i64(0))
    with u.for_range(b, 0, n, name="i") as i:
        room = b.icmp_signed("<", b.load(kept, typ=u.I64), max_det)
        alive = b.icmp_unsigned("==", u.load_at(b, suppressed, i, u.I8), ir.Constant(u.I8, 0))
        with b.if_then(b.and_(room, alive)):
            k = b.load(kept, typ=u.I64)
            u.store_at(b, i, keep, k)
            b.store(b.add(k, u.const_i64(1)), kept)
            _suppress_after(b, i, n, iou, cols, suppressed)
    b.ret(b.load(kept, typ=u.I64))


def _shift_boxes(b, boxes, classes, n, class_offset, cols, suppressed) -> None:
    """cols = shifted x1, y1, x2, y2 and area; suppressed = 0."""
    with u.for_range(b, 0, n, name="s") as i:
        shift = b.fmul(u.load_at(b, classes, i, u.F32), class_offset)
        row = b.mul(i, u.const_i64(4))
        coords = [b.fadd(u.load_at(b, boxes, b.add(row, u.const_i64(j)), u.F32), shift)
                  for j in range(4)]
        for col, value in zip(cols, coords):
            u.store_at(b, value, col, i)
        area = b.fmul(b.fsub(coords[2], coords[0]), b.fsub(coords[3], coords[1]))
        u.store_at(b, area, cols[4], i)
        u.store_at(b, ir.Constant(u.I8, 0), suppressed, i)


def _suppress_after(b, i, n, iou, cols, suppressed) -> None:
    """suppressed[j] |= IoU(i, j) > iou for every j > i."""
    x1, y1, x2, y2, area = (u.load_at(b, col, i, u.F32) for col in cols)
    zero = u.const_f32(0.0)
    with u.for_range(b, b.add(i, u.const_i64(1)), n, name="j") as j:
        jx1, jy1, jx2, jy2, jarea = (u.load_at(b, col, j, u.F32) for col in cols)
        w = _max(b, zero, b.fsub(_min(b, x2, jx2), _max(b, x1, jx1)))
        h = _max(b, zero, b.fsub(_min(b, y2, jy2), _max(b, y1, jy1)))
        inter = b.fmul(w, h)
        overlap = b.fdiv(inter, b.fsub(b.fadd(area, jarea), inter))
        hit = b.fcmp_ordered(">", b.fpext(overlap, u.F64), iou)
        flag = u.load_at(b, suppressed, j, u.I8)
        u.store_at(b, b.or_(flag, b.zext(hit, u.I8)), suppressed, j)


def _max(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    """std::max(a, c) = (a < c) ? c : a."""
    return b.select(b.fcmp_ordered("<", a, c), c, a)


def _min(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    """std::min(a, c) = (c < a) ? c : a."""
    return b.select(b.fcmp_ordered("<", c, a), c, a)


def nms_spec() -> KernelSpec:
    """The ``yolo.nms`` kernel (shape-independent)."""
    return KernelSpec(name="yolo.nms", build=build_nms, static={},
                      args=("ptr", "ptr", "i64", "f32", "f64", "i64", "ptr", "ptr", "ptr"),
                      ret="i64", fastmath=(), version=1)
