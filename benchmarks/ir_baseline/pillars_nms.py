"""The hand-built IR ``pillars.nms`` that ``cuvil_perception/ops/pillars/kernel_nms.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.geometry.bev_iou import AREA, CORNERS, EPS, RADIUS, TABLE_WIDTH, X, Y
from cuvil_perception.ops.pillars.config import HeadConfig
from cuvil_perception.ops.pillars.signatures import nms_args

MAX_VERTS = 16  # a quad clipped by 4 half-planes has at most 8 vertices


def build_nms(module: ir.Module, fn_name: str, *, threshold: float, post: int,
              pre: int) -> None:
    args = [u.PTR] * 3 + [u.I64] + [u.PTR] * 5
    fn = ir.Function(module, ir.FunctionType(u.I64, args), name=fn_name)
    boxes, cosines, sines, m, keep, suppressed, table, extents, near = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bufs = [_vertex_buffer(b) for _ in range(4)]
    _fill_table(b, boxes, cosines, sines, m, table, extents, pre)
    with u.for_range(b, 0, m, name="z") as j:
        u.store_at(b, ir.Constant(u.I8, 0), suppressed, j)
    kept = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    exit_block = fn.append_basic_block("exit")
    with u.for_range(b, 0, m, name="i") as i:
        live = b.icmp_unsigned("==", u.load_at(b, suppressed, i, u.I8), ir.Constant(u.I8, 0))
        with b.if_then(live):
            slot = b.load(kept)
            u.store_at(b, b.trunc(i, u.I32), keep, slot)
            b.store(b.add(slot, u.const_i64(1)), kept)
            full = b.icmp_signed(">=", b.add(slot, u.const_i64(1)), u.const_i64(post))
            go_on = fn.append_basic_block("go_on")
            b.cbranch(full, exit_block, go_on)
            b.position_at_end(go_on)
            _mark_near(b, extents, near, suppressed, m, i, pre)
            _suppress_after(b, table, m, i, suppressed, near, bufs, threshold)
    b.branch(exit_block)
    b.position_at_end(exit_block)
    b.ret(b.load(kept))


_HALF = ((0.5, 0.5), (-0.5, 0.5), (-0.5, -0.5), (0.5, -0.5))  # bev_iou._HALF


def _fill_table(b, boxes, cosines, sines, m, table, extents, pre: int) -> None:
    """table[j] = bev_iou.box_table(boxes)[j] bit for bit; extents[:, j] = its corners' box."""
    with u.for_range(b, 0, m, name="t") as j:
        field = lambda k: b.fpext(  # noqa: E731
            u.load_at(b, boxes, b.add(b.mul(j, u.const_i64(7)), u.const_i64(k)), u.F32), u.F64)
        x, y, dx, dy = field(0), field(1), field(3), field(4)
        c, s = u.load_at(b, cosines, j, u.F64), u.load_at(b, sines, j, u.F64)
        row = b.mul(j, u.const_i64(TABLE_WIDTH))
        put = lambda col, v: u.store_at(b, v, table, b.add(row, u.const_i64(col)))  # noqa
        put(X, x)
        put(Y, y)
        put(AREA, b.fmul(dx, dy))
        put(RADIUS, b.fmul(u.const_f64(0.5), u.intrinsic(
            b, "llvm.sqrt", b.fadd(b.fmul(dx, dx), b.fmul(dy, dy)))))
        xs, ys = [], []
        for k, (hx, hy) in enumerate(_HALF):
            px, py = b.fmul(u.const_f64(hx), dx), b.fmul(u.const_f64(hy), dy)
            xs.append(b.fsub(b.fadd(x, b.fmul(px, c)), b.fmul(py, s)))
            ys.append(b.fadd(b.fadd(y, b.fmul(px, s)), b.fmul(py, c)))
            put(CORNERS + 2 * k, xs[-1])
            put(CORNERS + 2 * k + 1, ys[-1])
        bounds = (_fold(b, u.fmin, xs), _fold(b, u.fmax, xs), _fold(b, u.fmin, ys),
                  _fold(b, u.fmax, ys))
        for col, value in enumerate(bounds):
            u.store_at(b, value, extents, b.add(j, u.const_i64(col * pre)))


def _fold(b, op, values):
    result = values[0]
    for value in values[1:]:
        result = op(b, result, value)
    return result


def _col(b, table, row, col: int) -> ir.Value:
    index = b.add(b.mul(row, u.const_i64(TABLE_WIDTH)), u.const_i64(col))
    return u.load_at(b, table, index, u.F64)


def _mark_near(b, extents, near, suppressed, m, i, pre: int) -> None:
    """near[j] = live j > i whose corner extent meets i's (1e-4 m margin). Branch-free so the
    loop vectoriser widens it."""
    column = lambda c, row: u.load_at(b, extents, b.add(row, u.const_i64(c * pre)), u.F64)  # noqa
    margin = u.const_f64(1e-4)
    lo_x, hi_x = b.fsub(column(0, i), margin), b.fadd(column(1, i), margin)
    lo_y, hi_y = b.fsub(column(2, i), margin), b.fadd(column(3, i), margin)
    with u.for_range(b, b.add(i, u.const_i64(1)), m, name="n") as j:
        meet = b.and_(b.and_(b.fcmp_ordered("<=", column(0, j), hi_x),
                             b.fcmp_ordered(">=", column(1, j), lo_x)),
                      b.and_(b.fcmp_ordered("<=", column(2, j), hi_y),
                             b.fcmp_ordered(">=", column(3, j), lo_y)))
        live = b.icmp_unsigned("==", u.load_at(b, suppressed, j, u.I8), ir.Constant(u.I8, 0))
        u.store_at(b, b.zext(b.and_(meet, live), u.I8), near, j)


def _suppress_after(b, table, m, i, suppressed, near, bufs, threshold) -> None:
    """Mark every near, live j > i whose IoU with i is > threshold."""
    with u.for_range(b, b.add(i, u.const_i64(1)), m, name="j") as j:
        flagged = b.icmp_unsigned("!=", u.load_at(b, near, j, u.I8), ir.Constant(u.I8, 0))
        with b.if_then(flagged):
            iou = _iou(b, table, i, j, bufs)
            with b.if_then(b.fcmp_ordered(">", iou, u.const_f64(threshold))):
                u.store_at(b, ir.Constant(u.I8, 1), suppressed, j)


def _iou(b, table, i, j, bufs) -> ir.Value:
    """bev_iou.iou_rows(table[i], table[j]) as float64."""
    area_a, area_b = _col(b, table, i, AREA), _col(b, table, j, AREA)
    result = u.entry_alloca(b, u.F64)
    b.store(u.const_f64(0.0), result)
    positive = b.and_(b.fcmp_ordered(">", area_a, u.const_f64(0.0)),
                      b.fcmp_ordered(">", area_b, u.const_f64(0.0)))
    with b.if_then(positive):
        xs, ys = bufs[0], bufs[1]
        for k in range(4):
            _put(b, xs, u.const_i64(k), _col(b, table, i, CORNERS + 2 * k))
            _put(b, ys, u.const_i64(k), _col(b, table, i, CORNERS + 2 * k + 1))
        count = u.const_i64(4)
        src, dst = (bufs[0], bufs[1]), (bufs[2], bufs[3])
        for k in range(4):
            a_pt = [_col(b, table, j, CORNERS + 2 * k + c) for c in (0, 1)]
            e = (k + 1) % 4
            b_pt = [_col(b, table, j, CORNERS + 2 * e + c) for c in (0, 1)]
            count = _clip(b, src, dst, count, a_pt, b_pt)
            src, dst = dst, src
        overlap = _area(b, src, count)
        overlap = b.select(b.fcmp_ordered("<", overlap, u.const_f64(0.0)),
                           u.const_f64(0.0), overlap)
        union = b.fsub(b.fadd(area_a, area_b), overlap)
        union = b.select(b.fcmp_ordered(">", union, u.const_f64(EPS)), union, u.const_f64(EPS))
        b.store(b.fdiv(overlap, union), result)
    return b.load(result)


def _vertex_buffer(b) -> ir.Value:
    """A double[MAX_VERTS] stack buffer in the entry block (typed double*, indexable by gep)."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        if entry.instructions:
            b.position_before(entry.instructions[0])
        return b.alloca(u.F64, size=MAX_VERTS)


def _put(b, buf, index, value) -> None:
    u.store_at(b, value, buf, index)


def _get(b, buf, index) -> ir.Value:
    return u.load_at(b, buf, index, u.F64)


def _side(b, ex, ey, ax, ay, px, py) -> ir.Value:
    """ex * (py - ay) - ey * (px - ax), in that order."""
    return b.fsub(b.fmul(ex, b.fsub(py, ay)), b.fmul(ey, b.fsub(px, ax)))


def _clip(b, src, dst, count, a_pt, b_pt) -> ir.Value:
    """bev_iou.clip_polygon: src polygon (count vertices) clipped into dst; returns the count."""
    ax, ay = a_pt
    ex, ey = b.fsub(b_pt[0], ax), b.fsub(b_pt[1], ay)
    out = u.entry_alloca(b, u.I64)
    b.store(u.const_i64(0), out)
    with u.for_range(b, 0, count, name="v") as k:
        nxt = _next_vertex(b, k, count)
        px, py = _get(b, src[0], k), _get(b, src[1], k)
        qx, qy = _get(b, src[0], nxt), _get(b, src[1], nxt)
        side_p = _side(b, ex, ey, ax, ay, px, py)
        side_q = _side(b, ex, ey, ax, ay, qx, qy)
        in_p = b.fcmp_ordered(">=", side_p, u.const_f64(0.0))
        in_q = b.fcmp_ordered(">=", side_q, u.const_f64(0.0))
        with b.if_then(in_p):
            _append(b, dst, out, px, py)
        with b.if_then(b.xor(in_p, in_q)):
            t = b.fdiv(side_p, b.fsub(side_p, side_q))
            ix = b.fadd(px, b.fmul(t, b.fsub(qx, px)))
            iy = b.fadd(py, b.fmul(t, b.fsub(qy, py)))
            _append(b, dst, out, ix, iy)
    return b.load(out)


def _next_vertex(b, k: ir.Value, count: ir.Value) -> ir.Value:
    """Index of the vertex after ``k`` in a closed polygon of ``count`` vertices."""
    nxt = b.add(k, u.const_i64(1))
    return b.select(b.icmp_signed("==", nxt, count), u.const_i64(0), nxt)


def _append(b, dst, out, x, y) -> None:
    n = b.load(out)
    _put(b, dst[0], n, x)
    _put(b, dst[1], n, y)
    b.store(b.add(n, u.const_i64(1)), out)


def _area(b, poly, count) -> ir.Value:
    """bev_iou.polygon_area: 0 below 3 vertices, else 0.5 * sequential shoelace sum."""
    twice = u.entry_alloca(b, u.F64)
    b.store(u.const_f64(0.0), twice)
    with u.for_range(b, 0, count, name="s") as k:
        nxt = _next_vertex(b, k, count)
        px, py = _get(b, poly[0], k), _get(b, poly[1], k)
        qx, qy = _get(b, poly[0], nxt), _get(b, poly[1], nxt)
        term = b.fsub(b.fmul(px, qy), b.fmul(qx, py))
        b.store(b.fadd(b.load(twice), term), twice)
    area = b.fmul(u.const_f64(0.5), b.load(twice))
    return b.select(b.icmp_signed("<", count, u.const_i64(3)), u.const_f64(0.0), area)


def nms_spec(head: HeadConfig) -> KernelSpec:
    """The NMS kernel for one head's threshold and keep cap."""
    return KernelSpec(name="pillars.nms", build=build_nms,
                      static={"threshold": head.nms_threshold, "post": head.nms_post,
                              "pre": head.nms_pre},
                      args=nms_args(), ret="i64",
                      fastmath=(), version=4)
