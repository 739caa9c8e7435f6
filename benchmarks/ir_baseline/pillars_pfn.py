"""The hand-built IR ``pillars.pfn`` that ``cuvil_perception/ops/pillars/kernel_pfn.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.kernel_pfn import fold_weights  # noqa: F401 (re-export)
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.signatures import pfn_args

LANES = 16
FLAGS = ("contract",)


def build_pfn(module: ir.Module, fn_name: str, *, channels: int, max_points: int,
              voxel: list, offset: list) -> None:
    if channels % LANES:
        raise ValueError(f"pfn: channels {channels} must be a multiple of {LANES}")
    fn = ir.Function(module, ir.FunctionType(u.VOID, [u.PTR] * 3 + [u.I64] + [u.PTR] * 3),
                     name=fn_name)
    voxels, coords, num_points, count, weights, bias, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    chunks = channels // LANES
    vty = u.vec(u.F32, LANES)
    with u.for_range(b, 0, count, name="p") as p:
        filled = b.sext(u.load_at(b, num_points, p, u.I32), u.I64)
        row0 = b.mul(p, u.const_i64(max_points * 4))
        sums = _sum_xyz(b, voxels, row0, filled)
        n_f = b.sitofp(filled, u.F32)
        centre = [_centre(b, coords, p, axis, voxel, offset) for axis in range(3)]
        dm = [b.fsub(b.fdiv(sums[a], n_f), centre[a]) for a in range(3)]
        padded = b.icmp_signed("<", filled, u.const_i64(max_points))
        for chunk in range(chunks):
            col = chunk * LANES
            w = lambda r: _vload(b, weights, r * channels + col, vty)  # noqa: E731
            bias_v = _vload(b, bias, col, vty)
            base = bias_v
            for axis in range(3):
                base = _fma(b, _splat(b, centre[axis], vty), w(axis), base)
                base = _fma(b, _splat(b, b.fneg(dm[axis]), vty), w(4 + axis), base)
            zero = ir.Constant(vty, [0.0] * LANES)
            start = b.select(padded, u.fmax(b, bias_v, zero), zero)
            acc = _max_over_points(b, voxels, row0, filled, centre, base, start,
                                   [w(10), w(11), w(12), w(13)], vty)
            _vstore(b, acc, out, b.add(b.mul(p, u.const_i64(channels)), u.const_i64(col)))
    b.ret_void()


def _sum_xyz(b, voxels, row0, filled) -> list:
    slots = [u.entry_alloca(b, u.F32, init=u.const_f32(0.0)) for _ in range(3)]
    with u.for_range(b, 0, filled, name="sum") as k:
        base = b.add(row0, b.mul(k, u.const_i64(4)))
        for axis in range(3):
            value = u.load_at(b, voxels, b.add(base, u.const_i64(axis)), u.F32)
            b.store(b.fadd(b.load(slots[axis]), value), slots[axis])
    return [b.load(s) for s in slots]


def _centre(b, coords, p, axis: int, voxel, offset) -> ir.Value:
    """cell index * voxel + (voxel / 2 + min), float32, for axis 0=x, 1=y, 2=z."""
    column = 2 - axis  # coords are (z, y, x)
    index = u.load_at(b, coords, b.add(b.mul(p, u.const_i64(3)), u.const_i64(column)), u.I32)
    scaled = b.fmul(b.sitofp(index, u.F32), u.const_f32(voxel[axis]))
    return b.fadd(scaled, u.const_f32(offset[axis]))


def _max_over_points(b, voxels, row0, filled, centre, base, start, rows, vty) -> ir.Value:
    acc_slot = u.entry_alloca(b, vty)
    b.store(start, acc_slot)
    with u.for_range(b, 0, filled, name="pt") as k:
        at = b.add(row0, b.mul(k, u.const_i64(4)))
        vals = [u.load_at(b, voxels, b.add(at, u.const_i64(c)), u.F32) for c in range(4)]
        rel = [b.fsub(vals[a], centre[a]) for a in range(3)] + [vals[3]]
        v = base
        for c in range(4):
            v = _fma(b, _splat(b, rel[c], vty), rows[c], v)
        b.store(u.fmax(b, b.load(acc_slot), v), acc_slot)
    return b.load(acc_slot)


def _fma(b, x, y, acc):
    return b.fadd(b.fmul(x, y, flags=FLAGS), acc, flags=FLAGS)


def _splat(b, scalar, vty):
    undef = ir.Constant(vty, ir.Undefined)
    one = b.insert_element(undef, scalar, u.const_i32(0))
    return b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, vty.count), [0] * vty.count))


def _vload(b, ptr, index, vty):
    """Unaligned vector load of ptr[index : index + lanes] (float32 elements)."""
    index = u.const_i64(index) if isinstance(index, int) else index
    return b.load(u.gep(b, ptr, index, u.F32), typ=vty, align=4)


def _vstore(b, value, ptr, index):
    b.store(value, u.gep(b, ptr, index, u.F32), align=4)


def pfn_spec(config: PillarConfig) -> KernelSpec:
    """The fused features + PFN kernel for one grid."""
    voxel = np.asarray(config.voxel_size, np.float32)
    offset = voxel / 2 + np.asarray(config.point_cloud_range[:3], np.float32)
    return KernelSpec(
        name="pillars.pfn", build=build_pfn,
        static={"channels": config.num_features, "max_points": config.max_points_per_pillar,
                "voxel": [float(v) for v in voxel], "offset": [float(v) for v in offset]},
        args=pfn_args(), ret=None,
        fastmath=FLAGS, version=1)
