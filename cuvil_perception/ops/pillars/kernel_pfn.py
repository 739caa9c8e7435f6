"""Native PillarVFE features + PFN, fused, computing only real points.

Signature::

    void pfn(ptr voxels f32[P, K, 4], ptr coords i32[P, 3], ptr num_points i32[P], i64 count,
             ptr weights f32[14, C], ptr bias f32[C], ptr out f32[P, C])

``weights`` rows 0-9 are the BN-folded linear weights W (features @ W + bias == BN(linear)),
rows 10-13 the combined rows A = W0 + W4 + W7, B = W1 + W5 + W8, Z = W2 + W6 + W9, D = W3
(see ``fold_weights``). Why: with u = p - cell centre and dm = pillar mean - cell centre, the
10 features of a point are linear in (u, r), so

    f . W = [cx W0 + cy W1 + cz W2 - dm . (W4, W5, W6)] + ux A + uy B + uz Z + r D

The bracket is one vector per pillar; each real point costs 4 FMAs per channel. Padded rows all
give relu(bias) (= relu(BN(0))), which enters the max once when the pillar has fewer than K points,
as in OpenPCDet. Working relative to the cell centre keeps the per-point terms small (|u| < a
voxel), so rounding stays at the level of the reference's own float32 arithmetic.
Rows of ``out`` past ``count`` are not written. fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...compile import KernelSpec, irutil as u
from .config import PillarConfig
from .signatures import pfn_args
from .types import PfnWeights

LANES = 16
FLAGS = ("contract",)


def fold_weights(weights: PfnWeights) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32 [14, C], bias float32 [C]) in the layout the kernel reads."""
    folded, bias = weights.folded()
    combined = np.stack([folded[0] + folded[4] + folded[7], folded[1] + folded[5] + folded[8],
                         folded[2] + folded[6] + folded[9], folded[3]])
    return np.ascontiguousarray(np.concatenate([folded, combined]), np.float32), bias


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
