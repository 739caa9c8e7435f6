"""Native ConvTranspose of the BEV network (an upsampling deblock, BatchNormalization folded,
+ ReLU), NHWC, kernel == stride, no padding: each output cell reads one input cell.

Signature::

    i64 bev_deconv(ptr inp f32[..], ptr weights f32[s*s*cin, cpad], ptr bias f32[cpad],
                   ptr out f32[hi*s*wi*s*ostride], ptr in_mask u8[hi*wi],
                   ptr out_mask u8[hi*s*wi*s])

Semantics (ONNX ConvTranspose, weight W [cin, cout, s, s], strides (s, s), pads 0):
out[iy*s + ty, ix*s + tx, ooff:ooff+cout] = act(bias + sum over ci of
``inp[iy, ix, ci] * weights[(ty*s + tx)*cin + ci, :]``), weights[(ty*s + tx)*cin + ci, co] =
W[ci, co, ty, tx]; input and output addressing as kernel_bev_conv (``ps``, ``cs``, ``ioff``;
``ostride``, ``ooff``). Returns the number of output cells computed.

Loops: per input row, per output phase (ty, tx), runs of ``run`` input cells share each
weight row (kernel_bev_conv's reasons); the tail takes runs of one. Sparse as in
kernel_bev_conv: an output cell is computed when its input cell is marked (bit 0 of
``in_mask``) this frame or was last frame; ``out_mask`` initialised to 1 everywhere.
fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, f32, i64, inline, kernel, kmath, local, u8, unroll
from .kernel_bev_conv import padded, run_length, store_cells
from .signatures import bev_deconv_args


@inline
def update_masks(in_mask, out_mask, iy, s, wi):
    """The s output rows of input row ``iy`` in ``out_mask``; whether one cell is busy."""
    busy = 0
    wo = wi * s
    for ix in range(wi):
        now = in_mask[iy * wi + ix] & 1
        for ty in unroll(s):
            for tx in unroll(s):
                at = (iy * s + ty) * wo + ix * s + tx
                state = ((out_mask[at] & 1) << 1) | now
                out_mask[at] = state
                busy |= state
    return busy


@inline
def cell_run(inp, weights, bias, out, iy, ix, ty, tx, cin, cout, chunks, s, wi, ps, cs, ioff,
             ostride, ooff, relu, run):
    """Output cells (iy*s + ty, (ix + r)*s + tx) for r < run (accumulators as
    kernel_bev_conv.cell_run's)."""
    acc = local(f32, run * chunks, 16)
    for r in unroll(run):
        for k in unroll(chunks):
            acc[r * chunks + k, :] = bias[k * 16:k * 16 + 16]
    at = (iy * wi + ix) * ps + ioff * cs
    base = (ty * s + tx) * cin
    for ci in range(cin):
        for k in unroll(chunks):
            w = weights[base + ci, k * 16:k * 16 + 16]
            for r in unroll(run):
                acc[r * chunks + k, :] = kmath.fma(inp[at + ci * cs + r * ps], w,
                                                   acc[r * chunks + k, :])
    for r in unroll(run):
        store_cells(out, ((iy * s + ty) * wi * s + (ix + r) * s + tx) * ostride + ooff, acc,
                    r * chunks, chunks, cout, relu)


@inline
def run_busy(out_mask, iy, ix, ty, tx, s, wi, run):
    busy = 0
    for r in unroll(run):
        busy |= out_mask[(iy * s + ty) * wi * s + (ix + r) * s + tx]
    return busy


@kernel(name="pillars.bev_deconv", fastmath=("contract",))
def bev_deconv(inp: Buf[f32], weights: Buf[f32, None, "cpad"], bias: Buf[f32, "cpad"],
               out: Buf[f32], in_mask: Buf[u8], out_mask: Buf[u8], *, cin: int, cout: int,
               cpad: int, s: int, hi: int, wi: int, ps: int, cs: int, ioff: int, ostride: int,
               ooff: int, relu: bool, sparse: bool, run: int) -> i64:
    computed = 0
    runs = wi // run
    for iy in range(hi):
        busy = 1
        if sparse:
            busy = update_masks(in_mask, out_mask, iy, s, wi)
        if busy != 0:
            for ty in unroll(s):
                for tx in unroll(s):
                    for k in range(runs):
                        ix = k * run
                        if (not sparse) or run_busy(out_mask, iy, ix, ty, tx, s, wi, run) != 0:
                            cell_run(inp, weights, bias, out, iy, ix, ty, tx, cin, cout, cpad // 16,
                                     s, wi, ps, cs, ioff, ostride, ooff, relu, run)
                            computed += run
                    for ix in range(runs * run, wi):
                        if (not sparse) or run_busy(out_mask, iy, ix, ty, tx, s, wi, 1) != 0:
                            cell_run(inp, weights, bias, out, iy, ix, ty, tx, cin, cout, cpad // 16,
                                     s, wi, ps, cs, ioff, ostride, ooff, relu, 1)
                            computed += 1
    return computed


def bev_deconv_spec(*, cin: int, cout: int, stride: int, in_size: tuple, in_layout: tuple,
                    out_layout: tuple, relu: bool, sparse: bool) -> KernelSpec:
    """The deconv kernel for one layer (layouts as bev_conv_spec's)."""
    return bev_deconv.spec(cin=cin, cout=cout, cpad=padded(cout), s=stride, hi=in_size[0],
                           wi=in_size[1], ps=in_layout[0], cs=in_layout[1], ioff=in_layout[2],
                           ostride=out_layout[0], ooff=out_layout[1], relu=bool(relu),
                           sparse=bool(sparse), run=run_length(cout),
                           arg_docs=bev_deconv_args())
