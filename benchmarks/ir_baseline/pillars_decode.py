"""The hand-built IR ``pillars.decode`` that ``cuvil_perception/ops/pillars/kernel_decode.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

import math

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
from cuvil_perception.ops.pillars.signatures import decode_args

FLAGS = ("contract",)
BLOCK = 2048  # anchors gated per vectorised pass (flags live in a stack buffer)


def build_decode(module: ir.Module, fn_name: str, *, anchors: int, classes: int, cap: int,
                 threshold: float, dir_offset: float) -> None:
    fn = ir.Function(module, ir.FunctionType(u.VOID, [u.PTR] * 9), name=fn_name)
    cls, box, dirs, table, out_boxes, out_scores, out_labels, out_anchor, counts = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    written = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    passed = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    logit_gate = math.log(threshold / (1.0 - threshold)) - 1e-3 if threshold > 0 else -math.inf
    gate = u.const_f32(logit_gate)
    flags = _byte_buffer(b, BLOCK)
    out = (out_boxes, out_scores, out_labels, out_anchor)
    with u.for_range(b, 0, (anchors + BLOCK - 1) // BLOCK, name="blk") as blk:
        start = b.mul(blk, u.const_i64(BLOCK))
        stop = b.add(start, u.const_i64(BLOCK))
        stop = b.select(b.icmp_signed(">", stop, u.const_i64(anchors)), u.const_i64(anchors), stop)
        # Phase 1, branch-free (vectorised): which anchors' best logit reaches the gate.
        with u.for_range(b, start, stop, name="g") as a:
            best, _ = _best_class(b, cls, a, classes)
            passes = b.zext(b.fcmp_ordered(">=", best, gate), u.I8)
            u.store_at(b, passes, flags, b.sub(a, start))
        # Phase 2: visit the flagged anchors, 8 flags per test.
        with u.for_range(b, 0, BLOCK // 8, name="w") as w:
            word = u.load_at(b, flags, w, u.I64)
            with b.if_then(b.icmp_unsigned("!=", word, u.const_i64(0))):
                with u.for_range(b, 0, 8, name="k") as k:
                    slot = b.add(b.mul(w, u.const_i64(8)), k)
                    a = b.add(start, slot)
                    flagged = b.icmp_unsigned("!=", u.load_at(b, flags, slot, u.I8),
                                              ir.Constant(u.I8, 0))
                    with b.if_then(b.and_(flagged, b.icmp_signed("<", a, stop))):
                        _score_and_decode(b, cls, box, dirs, table, a, out, written, passed,
                                          classes, cap, threshold, dir_offset)
    count = b.load(written)
    u.store_at(b, count, counts, 0)
    u.store_at(b, b.sub(b.load(passed), count), counts, 1)
    b.ret_void()


def _byte_buffer(b, size: int) -> ir.Value:
    """An i8[size] stack buffer in the entry block, 8-byte aligned (read as i64 words)."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        if entry.instructions:
            b.position_before(entry.instructions[0])
        buffer = b.alloca(u.I8, size=size)
        buffer.align = 64
        return buffer


def _score_and_decode(b, cls, box, dirs, table, a, out, written, passed, classes: int,
                      cap: int, threshold: float, dir_offset: float) -> None:
    """The exact test (sigmoid(best) >= threshold) and, if it passes, decode into ``out``."""
    out_boxes, out_scores, out_labels, out_anchor = out
    best, label = _best_class(b, cls, a, classes)
    score = u.sigmoid(b, best)
    with b.if_then(b.fcmp_ordered(">=", score, u.const_f32(threshold))):
        _bump(b, passed)
        slot = b.load(written)
        with b.if_then(b.icmp_signed("<", slot, u.const_i64(cap))):
            _decode_one(b, box, dirs, table, a, out_boxes, slot, dir_offset)
            u.store_at(b, score, out_scores, slot)
            u.store_at(b, label, out_labels, slot)
            u.store_at(b, b.trunc(a, u.I32), out_anchor, slot)
            b.store(b.add(slot, u.const_i64(1)), written)


def _best_class(b, cls, a, classes: int):
    """(max logit, first index of the max as i32)."""
    base = b.mul(a, u.const_i64(classes))
    best = u.load_at(b, cls, base, u.F32)
    label = u.const_i32(0)
    for k in range(1, classes):
        value = u.load_at(b, cls, b.add(base, u.const_i64(k)), u.F32)
        better = b.fcmp_ordered(">", value, best)
        best = b.select(better, value, best)
        label = b.select(better, u.const_i32(k), label)
    return best, label


def _decode_one(b, box, dirs, table, a, out_boxes, slot, dir_offset: float) -> None:
    """ResidualCoder decode + direction bins of anchor ``a`` into row ``slot``."""
    row = b.mul(a, u.const_i64(7))
    delta = [u.load_at(b, box, b.add(row, u.const_i64(k)), u.F32) for k in range(7)]
    anc = [u.load_at(b, table, b.add(row, u.const_i64(k)), u.F32) for k in range(7)]
    diag_sq = b.fadd(b.fmul(anc[3], anc[3]), b.fmul(anc[4], anc[4]))
    diagonal = u.intrinsic(b, "llvm.sqrt", diag_sq)
    out = [
        b.fadd(b.fmul(delta[0], diagonal), anc[0]),
        b.fadd(b.fmul(delta[1], diagonal), anc[1]),
        b.fadd(b.fmul(delta[2], anc[5]), anc[2]),
    ]
    out += [b.fmul(u.vexp(b, delta[k]), anc[k]) for k in (3, 4, 5)]
    heading = b.fadd(delta[6], anc[6])
    period = u.const_f32(math.pi)
    offset = u.const_f32(dir_offset)
    shifted = b.fsub(heading, offset)
    turns = u.intrinsic(b, "llvm.floor", b.fdiv(shifted, period))
    limited = b.fsub(shifted, b.fmul(turns, period))
    d_row = b.mul(a, u.const_i64(2))
    d0 = u.load_at(b, dirs, d_row, u.F32)
    d1 = u.load_at(b, dirs, b.add(d_row, u.const_i64(1)), u.F32)
    flip = b.select(b.fcmp_ordered(">", d1, d0), period, u.const_f32(0.0))
    out.append(b.fadd(b.fadd(limited, offset), flip))
    base = b.mul(slot, u.const_i64(7))
    for k in range(7):
        u.store_at(b, out[k], out_boxes, b.add(base, u.const_i64(k)))


def _bump(b, slot) -> None:
    b.store(b.add(b.load(slot), u.const_i64(1)), slot)


def decode_spec(config: PillarConfig, head: HeadConfig) -> KernelSpec:
    """The decode kernel for one grid and head."""
    height, width = head.map_size(config)
    return KernelSpec(
        name="pillars.decode", build=build_decode,
        static={"anchors": height * width * head.anchors_per_cell, "classes": head.num_classes,
                "cap": head.candidate_capacity(config), "threshold": head.score_threshold,
                "dir_offset": head.dir_offset},
        args=decode_args(), ret=None, fastmath=FLAGS, version=2)
