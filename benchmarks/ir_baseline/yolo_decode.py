"""The hand-built IR ``yolo.decode`` that ``cuvil_perception/ops/yolo/kernel_decode.py`` replaced
(same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec
from . import _ir as u

REG_MAX = 16
V16 = u.vec(u.F32, REG_MAX)


def build_decode(module: ir.Module, fn_name: str, *, grids: list, strides: list, nc: int) -> None:
    """Define the decode kernel for levels ``grids`` ([[h, w], ...]) with ``strides`` (pixels)."""
    args = [u.PTR, u.PTR, u.PTR, u.I64, u.F32, u.PTR, u.PTR, u.PTR]
    fn = ir.Function(module, ir.FunctionType(u.I64, args), name=fn_name)
    box_table, cls_table, cand, n, conf, boxes, scores, classes = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    box_ptrs = [b.load(u.gep(b, box_table, i, u.PTR), typ=u.PTR) for i in range(len(grids))]
    cls_ptrs = [b.load(u.gep(b, cls_table, i, u.PTR), typ=u.PTR) for i in range(len(grids))]
    kept = u.entry_alloca(b, u.I64, "kept", init=u.const_i64(0))
    with u.for_range(b, 0, n, name="k") as k:
        anchor = u.load_at(b, cand, k, u.I64)
        lv = _level_of(b, anchor, grids, strides, box_ptrs, cls_ptrs)
        best, logit = _best_class(b, lv, nc)
        score = u.sigmoid(b, logit)
        with b.if_then(b.fcmp_ordered(">", score, conf)):
            m = b.load(kept, typ=u.I64)
            _decode_box(b, lv, boxes, m)
            u.store_at(b, score, scores, m)
            u.store_at(b, b.uitofp(best, u.F32), classes, m)
            b.store(b.add(m, u.const_i64(1)), kept)
    b.ret(b.load(kept, typ=u.I64))


def _level_of(b: ir.IRBuilder, anchor: ir.Value, grids, strides, box_ptrs, cls_ptrs) -> dict:
    """Select the level facts of ``anchor`` (levels are contiguous index ranges, in order)."""
    lv = {"p": anchor, "w": u.const_i64(grids[0][1]), "hw": u.const_i64(grids[0][0] * grids[0][1]),
          "stride": u.const_f32(strides[0]), "box": box_ptrs[0], "cls": cls_ptrs[0]}
    offset = grids[0][0] * grids[0][1]
    for i in range(1, len(grids)):
        h, w = grids[i]
        inside = b.icmp_signed(">=", anchor, u.const_i64(offset))
        lv["p"] = b.select(inside, b.sub(anchor, u.const_i64(offset)), lv["p"])
        lv["w"] = b.select(inside, u.const_i64(w), lv["w"])
        lv["hw"] = b.select(inside, u.const_i64(h * w), lv["hw"])
        lv["stride"] = b.select(inside, u.const_f32(strides[i]), lv["stride"])
        lv["box"] = b.select(inside, box_ptrs[i], lv["box"])
        lv["cls"] = b.select(inside, cls_ptrs[i], lv["cls"])
        offset += h * w
    return lv


def _best_class(b: ir.IRBuilder, lv: dict, nc: int) -> tuple[ir.Value, ir.Value]:
    """(first index of the maximal class logit as i64, that logit)."""
    base = u.gep(b, lv["cls"], lv["p"], u.F32)
    best_val = u.entry_alloca(b, u.F32, "best_val")
    best_idx = u.entry_alloca(b, u.I64, "best_idx")
    b.store(b.load(base, typ=u.F32), best_val)
    b.store(u.const_i64(0), best_idx)
    with u.for_range(b, 1, nc, name="c") as c:
        value = u.load_at(b, base, b.mul(c, lv["hw"]), u.F32)
        current = b.load(best_val, typ=u.F32)
        bigger = b.fcmp_ordered(">", value, current)  # strict: ties keep the lower class
        b.store(b.select(bigger, value, current), best_val)
        b.store(b.select(bigger, c, b.load(best_idx, typ=u.I64)), best_idx)
    return b.load(best_idx, typ=u.I64), b.load(best_val, typ=u.F32)


def _side_distance(b: ir.IRBuilder, lv: dict, side: int) -> ir.Value:
    """DFL expectation of one side, in grid cells."""
    vec = ir.Constant(V16, None)
    for k in range(REG_MAX):
        channel = u.const_i64(side * REG_MAX + k)
        index = b.add(b.mul(channel, lv["hw"]), lv["p"])
        vec = b.insert_element(vec, u.load_at(b, lv["box"], index, u.F32), u.const_i32(k))
    top = u.reduce_fmax(b, vec)
    e = u.vexp(b, b.fsub(vec, _splat(b, top)))
    total = u.reduce_fadd(b, e, flags=())
    weights = ir.Constant(V16, [ir.Constant(u.F32, float(k)) for k in range(REG_MAX)])
    expect = u.reduce_fadd(b, b.fmul(e, weights), flags=())
    return b.fdiv(expect, total)


def _splat(b: ir.IRBuilder, scalar: ir.Value) -> ir.Value:
    one = b.insert_element(ir.Constant(V16, None), scalar, u.const_i32(0))
    return b.shuffle_vector(one, ir.Constant(V16, None),
                            ir.Constant(u.vec(u.I32, REG_MAX), [0] * REG_MAX))


def _decode_box(b: ir.IRBuilder, lv: dict, boxes: ir.Value, m: ir.Value) -> None:
    """boxes[m] = xyxy of this anchor, in the exported graph's order of operations."""
    gy = b.udiv(lv["p"], lv["w"])
    gx = b.sub(lv["p"], b.mul(gy, lv["w"]))
    half_cell = u.const_f32(0.5)
    ax = b.fadd(b.uitofp(gx, u.F32), half_cell)
    ay = b.fadd(b.uitofp(gy, u.F32), half_cell)
    left, top, right, bottom = (_side_distance(b, lv, side) for side in range(4))
    x1, y1 = b.fsub(ax, left), b.fsub(ay, top)
    x2, y2 = b.fadd(ax, right), b.fadd(ay, bottom)
    two = u.const_f32(2.0)
    cx = b.fmul(b.fdiv(b.fadd(x1, x2), two), lv["stride"])
    cy = b.fmul(b.fdiv(b.fadd(y1, y2), two), lv["stride"])
    half_w = b.fdiv(b.fmul(b.fsub(x2, x1), lv["stride"]), two)
    half_h = b.fdiv(b.fmul(b.fsub(y2, y1), lv["stride"]), two)
    row = b.mul(m, u.const_i64(4))
    for j, value in enumerate((b.fsub(cx, half_w), b.fsub(cy, half_h),
                               b.fadd(cx, half_w), b.fadd(cy, half_h))):
        u.store_at(b, value, boxes, b.add(row, u.const_i64(j)))


def decode_spec(grids, strides, nc: int) -> KernelSpec:
    """The ``yolo.decode`` kernel for these level grids, strides (pixels) and class count."""
    return KernelSpec(name="yolo.decode", build=build_decode,
                      static={"grids": [list(map(int, g)) for g in grids],
                              "strides": [float(s) for s in strides], "nc": int(nc)},
                      args=("ptr", "ptr", "ptr", "i64", "f32", "ptr", "ptr", "ptr"), ret="i64",
                      fastmath=(), version=1)
