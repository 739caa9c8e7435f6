"""Native ConvTranspose of the BEV network (an upsampling deblock, BatchNormalization folded,
+ ReLU), NHWC, kernel == stride, no padding: each output cell reads one input cell.

The signature, with units and roles, is the kernel's annotations. Semantics (ONNX ConvTranspose,
weight W [cin, cout, s, s], strides (s, s), pads 0): out[iy*s + ty, ix*s + tx, ooff:ooff+cout] =
act(bias + sum over ci of ``inp[iy, ix, ci] * weights[(ty*s + tx)*cin + ci, :]``), weights[(ty*s
+ tx)*cin + ci, co] = W[ci, co, ty, tx]; input and output addressing as kernel_bev_conv (``ps``,
``cs``, ``ioff``; ``ostride``, ``ooff``). Returns the number of output cells computed.

Loops: per input row, per output phase (ty, tx), runs of ``run`` input cells share each
weight row (kernel_bev_conv's reasons); the tail takes runs of one. Sparse as in
kernel_bev_conv: an output cell is computed when its input cell is marked (bit 0 of
``in_mask``) this frame or was last frame; ``out_mask`` initialised to 1 everywhere; the busy
input cells of a row are gathered into runs (a run never computes idle cells).
fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import Buf, In, State, f32, i64, inline, kernel, kmath, local, u8, unroll
from .kernel_bev_conv import padded, run_length, store_cells


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
def cell_group(inp, weights, bias, out, iy, xs, g, ty, tx, cin, cout, chunks, s, wi, ps, cs, ioff,
               ostride, ooff, relu, run):
    """``cell_run`` for the input cells ``xs[g .. g + run)`` of row ``iy`` (any columns: the
    busy cells of a sparse row, gathered); each cell sums as in ``cell_run``: the same bits."""
    acc = local(f32, run * chunks, 16)
    for r in unroll(run):
        for k in unroll(chunks):
            acc[r * chunks + k, :] = bias[k * 16:k * 16 + 16]
    at = iy * wi * ps + ioff * cs
    base = (ty * s + tx) * cin
    for ci in range(cin):
        for k in unroll(chunks):
            w = weights[base + ci, k * 16:k * 16 + 16]
            for r in unroll(run):
                acc[r * chunks + k, :] = kmath.fma(inp[at + xs[g + r] * ps + ci * cs], w,
                                                   acc[r * chunks + k, :])
    for r in unroll(run):
        store_cells(out, ((iy * s + ty) * wi * s + xs[g + r] * s + tx) * ostride + ooff, acc,
                    r * chunks, chunks, cout, relu)


@inline
def busy_cells(out_mask, xs, iy, s, wi, run):
    """The input cells of row ``iy`` whose output cells are to be computed (the s*s outputs of
    one input cell share their mask state) into ``xs``, padded with the last one to whole runs;
    how many."""
    n = 0
    for ix in range(wi):
        if out_mask[iy * s * wi * s + ix * s] != 0:
            xs[n] = ix
            n += 1
    if n > 0:
        for r in range(n, (n + run - 1) // run * run):
            xs[r] = xs[n - 1]
    return n


@kernel(name="pillars.bev_deconv", fastmath=("contract",))
def bev_deconv(
        inp: Buf[f32, In(doc="input map (as bev_conv's)", rows="hi * wi * ps")],
        weights: Buf[f32, None, "cpad", In(
            doc="BN-folded weight, [(ty * s + tx) * cin + ci, co] = W[ci, co, ty, tx], "
                "zero-padded", rows="s * s * cin")],
        bias: Buf[f32, "cpad", In(doc="BN-folded bias, zero-padded")],
        out: Buf[f32, State(doc="output map (as bev_conv's)",
                            rows="hi * s * wi * s * ostride + 16")],
        in_mask: Buf[u8, In(doc="as bev_conv's", rows="hi * wi")],
        out_mask: Buf[u8, State(doc="as bev_conv's", rows="hi * s * wi * s")], *, cin: int,
        cout: int, cpad: int, s: int, hi: int, wi: int, ps: int, cs: int, ioff: int,
        ostride: int, ooff: int, relu: bool, sparse: bool, run: int) -> i64:
    computed = 0
    runs = wi // run
    xs = local(i64, wi + run)
    for iy in range(hi):
        if sparse:
            busy = update_masks(in_mask, out_mask, iy, s, wi)
            n = 0
            if busy != 0:
                n = busy_cells(out_mask, xs, iy, s, wi, run)
            for ty in unroll(s):
                for tx in unroll(s):
                    for g in range(0, n, run):
                        cell_group(inp, weights, bias, out, iy, xs, g, ty, tx, cin, cout,
                                   cpad // 16, s, wi, ps, cs, ioff, ostride, ooff, relu, run)
            computed += n * s * s
        else:
            for ty in unroll(s):
                for tx in unroll(s):
                    for k in range(runs):
                        cell_run(inp, weights, bias, out, iy, k * run, ty, tx, cin, cout,
                                 cpad // 16, s, wi, ps, cs, ioff, ostride, ooff, relu, run)
                    for ix in range(runs * run, wi):
                        cell_run(inp, weights, bias, out, iy, ix, ty, tx, cin, cout, cpad // 16,
                                 s, wi, ps, cs, ioff, ostride, ooff, relu, 1)
            computed += wi * s * s
    return computed


def bev_deconv_spec(*, cin: int, cout: int, stride: int, in_size: tuple, in_layout: tuple,
                    out_layout: tuple, relu: bool, sparse: bool) -> KernelSpec:
    """The deconv kernel for one layer (layouts as bev_conv_spec's)."""
    return bev_deconv.spec(cin=cin, cout=cout, cpad=padded(cout), s=stride, hi=in_size[0],
                           wi=in_size[1], ps=in_layout[0], cs=in_layout[1], ioff=in_layout[2],
                           ostride=out_layout[0], ooff=out_layout[1], relu=bool(relu),
                           sparse=bool(sparse), run=run_length(cout))
