"""The hand-built IR ``pillars.head_cells`` that ``cuvil_perception/ops/pillars/kernel_head_cells.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import HeadConfig, logit_gate
from cuvil_perception.ops.pillars.signatures import head_cells_args

FLAGS = ("contract",)
LANES = 16


def padded(width: int) -> int:
    """J rounded up to whole 16-lane vectors (the weight / bias row length)."""
    return -(-width // LANES) * LANES


def build_head_cells(module: ir.Module, fn_name: str, *, cells: int, groups: int, classes: int,
                     parts: list, jb: int, jd: int, gate: float) -> None:
    fn = ir.Function(module, ir.FunctionType(u.I64, [u.PTR] * 7), name=fn_name)
    cls, table, weights, bias, box, dirs, found = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    feats = [(b.load(u.gep(b, table, k, u.PTR), typ=u.PTR), count)
             for k, count in enumerate(parts)]
    width = padded(jb + jd)
    vty = u.vec(u.F32, LANES)
    biases = [u.load_vec(b, bias, off, vty) for off in range(0, width, LANES)]
    n_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    with u.for_range(b, 0, cells, name="c") as c:
        with b.if_then(_passes(b, cls, c, groups, classes, gate)):
            n = b.load(n_slot)
            u.store_at(b, b.trunc(c, u.I32), found, n)
            b.store(b.add(n, u.const_i64(1)), n_slot)
            acc = _gather_matvec(b, feats, weights, c, biases, cells, width)
            _copy(b, acc, 0, box, b.mul(c, u.const_i64(jb)), jb)
            _copy(b, acc, jb, dirs, b.mul(c, u.const_i64(jd)), jd)
    b.ret(b.load(n_slot))


def _passes(b, cls, c, groups: int, classes: int, gate: float) -> ir.Value:
    """Whether some anchor of cell ``c`` has its best class logit >= gate, the best taken the
    way the decode kernel takes it (first logit, replaced only by a strictly greater one), so
    every anchor decode looks at - NaN logits included - lies in a candidate cell."""
    base = b.mul(c, u.const_i64(groups))
    flag = ir.Constant(u.I1, 0)
    for first in range(0, groups, classes):
        best = u.load_at(b, cls, b.add(base, u.const_i64(first)), u.F32)
        for k in range(first + 1, first + classes):
            value = u.load_at(b, cls, b.add(base, u.const_i64(k)), u.F32)
            best = b.select(b.fcmp_ordered(">", value, best), value, best)
        flag = b.or_(flag, b.fcmp_ordered(">=", best, u.const_f32(gate)))
    return flag


def _gather_matvec(b, feats: list, weights, c, biases, cells: int, width: int) -> list:
    """bias + sum over channels ci of F (parts in order) of F[ci, c] * weights[ci, :], one
    vector per 16 rows."""
    vty = u.vec(u.F32, LANES)
    slots = [u.entry_alloca(b, vty) for _ in biases]
    for slot, value in zip(slots, biases):
        b.store(value, slot)
    first = 0
    for feat, count in feats:
        with u.for_range(b, 0, count, name="ci") as ci:
            at = b.add(b.mul(ci, u.const_i64(cells)), c)
            value = _splat(b, u.load_at(b, feat, at, u.F32), vty)
            row = b.mul(b.add(ci, u.const_i64(first)), u.const_i64(width))
            for k, slot in enumerate(slots):
                w = u.load_vec(b, weights, b.add(row, u.const_i64(k * LANES)), vty)
                b.store(b.fadd(b.load(slot), b.fmul(value, w, flags=FLAGS), flags=FLAGS), slot)
        first += count
    return [b.load(slot) for slot in slots]


def _splat(b, scalar, vty):
    undef = ir.Constant(vty, ir.Undefined)
    one = b.insert_element(undef, scalar, u.const_i32(0))
    return b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, vty.count), [0] * vty.count))


def _copy(b, vectors: list, start: int, dst, at, count: int) -> None:
    """dst[at + j] = lane start + j of the concatenated ``vectors``, for j < count."""
    for j in range(count):
        lane = start + j
        value = b.extract_element(vectors[lane // LANES], u.const_i32(lane % LANES))
        u.store_at(b, value, dst, b.add(at, u.const_i64(j)))


def head_cells_spec(map_size: tuple, head: HeadConfig, parts: tuple) -> KernelSpec:
    """The candidate-cell heads kernel for one head map (H, W) and feature parts (C_1, ..)."""
    per_cell = head.anchors_per_cell
    return KernelSpec(
        name="pillars.head_cells", build=build_head_cells,
        static={"cells": map_size[0] * map_size[1], "groups": per_cell * head.num_classes,
                "classes": head.num_classes, "parts": [int(c) for c in parts], "jb": per_cell * 7,
                "jd": per_cell * 2,
                "gate": logit_gate(head.score_threshold)},
        args=head_cells_args(), ret="i64", fastmath=FLAGS, version=3)
