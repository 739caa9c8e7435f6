"""Native PillarVFE features + PFN, fused, computing only real points.

The signature, with units and roles, is the kernel's annotations (the C header of a library is
written from them). ``weights`` rows 0-9 are the BN-folded linear weights W (features @ W + bias
== BN(linear)), rows 10-13 the combined rows A = W0 + W4 + W7, B = W1 + W5 + W8, Z = W2 + W6 +
W9, D = W3 (see ``fold_weights``). Why: with u = p - cell centre and dm = pillar mean - cell
centre, the 10 features of a point are linear in (u, r), so

    f . W = [cx W0 + cy W1 + cz W2 - dm . (W4, W5, W6)] + ux A + uy B + uz Z + r D

The bracket is one vector per pillar; each real point costs 4 FMAs per channel. Padded rows all
give relu(bias) (= relu(BN(0))), which enters the max once when the pillar has fewer than K points,
as in OpenPCDet. Working relative to the cell centre keeps the per-point terms small (|u| < a
voxel), so rounding stays at the level of the reference's own float32 arithmetic.
Rows of ``out`` past ``count`` are not written. The per-pillar rows (``base``, the running max
``acc``) are vector values over the C channels (``weights[k, :]``: one row of C), so they live
in registers; FMAs are explicit (``kmath.fma``), every other operation rounds on its own (no
fast-math flags).
"""

from __future__ import annotations

import numpy as np

from ...compile import KernelSpec
from ...compile.lang import Buf, In, Out, f32, i32, i64, kernel, kmath, simd
from .config import PillarConfig
from .types import PfnWeights


def fold_weights(weights: PfnWeights) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32 [14, C], bias float32 [C]) in the layout the kernel reads."""
    folded, bias = weights.folded()
    combined = np.stack([folded[0] + folded[4] + folded[7], folded[1] + folded[5] + folded[8],
                         folded[2] + folded[6] + folded[9], folded[3]])
    return np.ascontiguousarray(np.concatenate([folded, combined]), np.float32), bias


# noalias=False (the buffers never overlap): with noalias, LLVM hoists all 11 weight rows (44 zmm
# for C = 64) out of the pillar loop and they spill into the point loop (measured ~1.15x slower).
@kernel(name="pillars.pfn", noalias=False)
def pfn(voxels: Buf[f32, None, "max_points", 4, In("m (x, y, z); reflectance",
                                                    "pillarize's voxels", rows="count")],
        coords: Buf[i32, None, 3, In("cells (z, y, x)", rows="count")],
        num_points: Buf[i32, In("points", rows="count")],
        count: i64[In("pillars", "pillars to compute (counts[0] of pillarize)")],
        weights: Buf[f32, 14, "channels", In(doc=(
            "PFN Linear(10 -> C, no bias) with its BatchNorm folded in: rows 0-9 W[k, c] = "
            "linear[k, c] * gamma[c] / sqrt(var[c] + eps) for the point features k = x, y, z, "
            "r, x - pillar mean x, y - mean y, z - mean z, x - cell centre x, y - centre y, "
            "z - centre z; rows 10-13 = W0 + W4 + W7, W1 + W5 + W8, W2 + W6 + W9, W3"))],
        bias: Buf[f32, "channels", In(
            doc="folded BatchNorm bias: beta[c] - mean[c] * gamma[c] / sqrt(var[c] + eps)")],
        out: Buf[f32, None, "channels", Out(
            doc="pillar features; rows past count are not written", rows="count")], *,
        channels: int, max_points: int, voxel: tuple, offset: tuple):
    for p in range(count):
        filled = i64(num_points[p])
        sx = sy = sz = f32(0.0)
        for k in range(filled):
            sx, sy, sz = sx + voxels[p, k, 0], sy + voxels[p, k, 1], sz + voxels[p, k, 2]
        cx = f32(coords[p, 2]) * voxel[0] + offset[0]  # cell centres (coords are z, y, x)
        cy = f32(coords[p, 1]) * voxel[1] + offset[1]
        cz = f32(coords[p, 0]) * voxel[2] + offset[2]
        n = f32(filled)
        dmx, dmy, dmz = sx / n - cx, sy / n - cy, sz / n - cz
        base = kmath.fma(-dmx, weights[4, :], kmath.fma(cx, weights[0, :], bias[:]))
        base = kmath.fma(-dmy, weights[5, :], kmath.fma(cy, weights[1, :], base))
        base = kmath.fma(-dmz, weights[6, :], kmath.fma(cz, weights[2, :], base))
        padded = filled < max_points  # the padded rows' relu(bias) enters the max once
        acc = simd.select((bias[:] > 0.0) & padded, bias[:], 0.0)
        for k in range(filled):
            ux, uy, uz = voxels[p, k, 0] - cx, voxels[p, k, 1] - cy, voxels[p, k, 2] - cz
            r = voxels[p, k, 3]
            v = kmath.fma(uy, weights[11, :], kmath.fma(ux, weights[10, :], base))
            v = kmath.fma(r, weights[13, :], kmath.fma(uz, weights[12, :], v))
            acc = simd.select(acc > v, acc, v)
        out[p, :] = acc


def pfn_spec(config: PillarConfig) -> KernelSpec:
    """The fused features + PFN kernel for one grid."""
    voxel = np.asarray(config.voxel_size, np.float32)
    offset = voxel / 2 + np.asarray(config.point_cloud_range[:3], np.float32)
    return pfn.spec(channels=config.num_features, max_points=config.max_points_per_pillar,
                    voxel=[float(v) for v in voxel], offset=[float(v) for v in offset])
