"""Native 2-D convolution of the BEV network (Conv with BatchNormalization folded, + ReLU), NHWC,
skipping the output cells whose inputs did not change from the empty frame.

The signature, with units and roles, is the kernel's annotations. Semantics: out[oy, ox,
ooff:ooff+cout] = act(bias + sum over (ky, kx, ci) of ``inp[iy, ix, ci] * weights[(ky*kw +
kx)*cin + ci, :]``) with iy = oy*sy - top + ky, ix = ox*sx - left + kx (taps outside the input
are zero padding), ``act`` ReLU or identity. The input element (iy, ix, ci) is at ``iy*row +
ix*ps + (ioff + ci)*cs``: NHWC (``ps`` the pixel's channel count, ``cs`` 1; ``ioff`` the first
channel of a Concat part) or NCHW (``ps`` 1, ``cs`` hi*wi: the dense scatter's canvas). Output
cells are rows of ``ostride`` floats, this layer's channels at ``ooff`` (a Concat's producers
write their parts in place). Returns the number of output cells computed.

Layout: NHWC, because the BEV maps here have 16-128 channels and strides 1 and 2. A cell's
C_out outputs are one vector value (one zmm for 16 channels), each input value is one
broadcast FMA operand, and a stride-2 layer reads the same way as a stride-1 one (NCHW would
vectorise over output pixels and need strided loads for stride 2). The loops: per output row,
runs of ``run`` neighbouring cells share each weight row load (``run`` independent FMA chains
hide the FMA latency: run x ceil(cout/16) = 8 accumulators), the (ky, kx, ci) loop inner; the
cells where a kx tap falls in the padding (the row ends) and the tail take a one-cell path.

Sparse (``sparse`` true): ``in_mask`` bit 0 marks the input cells that differ from what the
empty frame gives there; an output cell whose taps all read unmarked cells holds the empty
frame's value, so it is not computed unless it was computed last frame (its stored value may
be a real frame's). ``out_mask`` keeps per cell bit 0 = "an input tap is marked this frame",
bit 1 = "bit 0 was set last frame"; a cell is computed when either is set, and a run when one
of its cells is. Initialise ``out_mask`` to 1 everywhere ("marked last frame"): the first
call computes every cell (so the maps need no initial value). The value of a cell depends
only on its own taps, in a fixed order, so skipping is exact: the same bits as computing
every cell.
fast-math: ``contract`` only (FMA).
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, State, f32, i32, i64, inline, kernel, kmath, local, simd,
                             u8, unroll)
from ...compile.target import host_has

# A 1x1 layer reading this many NHWC channels or more prefetches its run's input lines: its
# input is a map too large for the caches (the demo's 128-channel concat, 27 MB) read at scattered
# runs on the sparse path, where the hardware prefetcher does not follow.
FETCH_CHANNELS = 64
ACCUMULATORS = 8  # vector accumulators per run: run * ceil(cout / 16)


@inline
def tap_mask(in_mask, y0, ky_lo, ky_hi, x0, kw, wi):
    """Bit 0 of the input cells the output cell at (y0, x0) reads (padding reads nothing)."""
    now = 0
    for ky in range(ky_lo, ky_hi):
        for kx in unroll(kw):
            ix = x0 + kx
            inside = (ix >= 0) & (ix < wi)
            now |= in_mask[(y0 + ky) * wi + min(max(ix, 0), wi - 1)] & i64(inside)
    return now & 1


@inline
def update_masks(in_mask, out_mask, oy, y0, ky_lo, ky_hi, kw, sx, left, wi, wo):
    """Row ``oy`` of ``out_mask`` for this frame; whether a cell of the row is to be computed."""
    busy = 0
    for ox in range(wo):
        now = tap_mask(in_mask, y0, ky_lo, ky_hi, ox * sx - left, kw, wi)
        state = ((out_mask[oy * wo + ox] & 1) << 1) | now
        out_mask[oy * wo + ox] = state
        busy |= state
    return busy


@inline
def store_cells(out, at, acc, first, chunks, cout, relu):
    """Rows ``first ..`` of ``acc`` (16-lane chunks of one cell) stored at ``out[at:]``: the
    lanes past ``cout`` of the last chunk keep what ``out`` holds there (a blend, so a width
    such as 18 or 42 stays whole vectors; maps have 16 floats of slack at their end)."""
    for k in unroll(chunks):
        value = acc[first + k, :]
        if relu:
            value = simd.max(0.0, value)
        if (k + 1) * 16 > cout:
            keep = simd.iota(i32, 16) < cout - k * 16
            value = simd.select(keep, value, simd.load(out, at + k * 16, 16))
        simd.store(out, at + k * 16, value)


@inline
def one_cell(inp, weights, bias, out, oy, ox, y0, ky_lo, ky_hi, cin, cout, chunks, kw, sx, left,
             wi, row, ps, cs, ioff, wo, ostride, ooff, relu):
    """One output cell, taps in the padding skipped."""
    acc = local(f32, chunks, 16)
    for k in unroll(chunks):
        acc[k, :] = bias[k * 16:k * 16 + 16]
    x0 = ox * sx - left
    for ky in range(ky_lo, ky_hi):
        for kx in unroll(kw):
            ix = x0 + kx
            if (ix >= 0) & (ix < wi):
                at = (y0 + ky) * row + ix * ps + ioff * cs
                base = (ky * kw + kx) * cin
                for ci in range(cin):
                    x = inp[at + ci * cs]
                    for k in unroll(chunks):
                        acc[k, :] = kmath.fma(x, weights[base + ci, k * 16:k * 16 + 16],
                                              acc[k, :])
    store_cells(out, (oy * wo + ox) * ostride + ooff, acc, 0, chunks, cout, relu)


@inline
def cell_run(inp, weights, bias, out, oy, ox, y0, ky_lo, ky_hi, cin, cout, chunks, kw, sx, left,
             wi, row, ps, cs, ioff, wo, ostride, ooff, relu, run, fetch):
    """``run`` neighbouring output cells from ``ox``, every tap inside the input along x; the
    accumulators are 16-lane rows (``acc[r * chunks + k]``: a wider row as one vector value
    was scalarised across the loop for widths such as 42)."""
    acc = local(f32, run * chunks, 16)
    for r in unroll(run):
        for k in unroll(chunks):
            acc[r * chunks + k, :] = bias[k * 16:k * 16 + 16]
        if fetch:  # every line of the run's input cells up front (see FETCH_CHANNELS)
            for line in unroll(cin // 16):
                simd.prefetch(inp, (y0 * wi + ox * sx - left + r * sx) * ps + ioff + line * 16)
    for ky in range(ky_lo, ky_hi):
        for kx in unroll(kw):
            at = (y0 + ky) * row + (ox * sx - left + kx) * ps + ioff * cs
            base = (ky * kw + kx) * cin
            for ci in range(cin):
                for k in unroll(chunks):
                    w = weights[base + ci, k * 16:k * 16 + 16]
                    for r in unroll(run):
                        acc[r * chunks + k, :] = kmath.fma(inp[at + ci * cs + r * sx * ps], w,
                                                           acc[r * chunks + k, :])
    for r in unroll(run):
        store_cells(out, (oy * wo + ox + r) * ostride + ooff, acc, r * chunks, chunks, cout,
                    relu)


@inline
def cell_group(inp, weights, bias, out, oy, xs, y0, ky_lo, ky_hi, cin, cout, chunks, kw, sx, left,
               row, ps, cs, ioff, wo, ostride, ooff, relu, run):
    """``run`` output cells of row ``oy`` at columns ``xs[0..run)`` (any, every tap inside
    the input along x): ``cell_run`` for the busy cells of a sparse row, gathered so that a
    run is never computed for one busy cell among idle ones. Each cell sums in the same order
    as ``cell_run`` and ``one_cell``: the same bits."""
    acc = local(f32, run * chunks, 16)
    for r in unroll(run):
        for k in unroll(chunks):
            acc[r * chunks + k, :] = bias[k * 16:k * 16 + 16]
    for ky in range(ky_lo, ky_hi):
        for kx in unroll(kw):
            at = (y0 + ky) * row + (kx - left) * ps + ioff * cs
            base = (ky * kw + kx) * cin
            for ci in range(cin):
                for k in unroll(chunks):
                    w = weights[base + ci, k * 16:k * 16 + 16]
                    for r in unroll(run):
                        acc[r * chunks + k, :] = kmath.fma(
                            inp[at + xs[r] * sx * ps + ci * cs], w, acc[r * chunks + k, :])
    for r in unroll(run):
        store_cells(out, (oy * wo + xs[r]) * ostride + ooff, acc, r * chunks, chunks, cout,
                    relu)


@inline
def busy_groups(inp, weights, bias, out, out_mask, oy, y0, ky_lo, ky_hi, cin, cout, chunks, kw,
                sx, left, wi, row, ps, cs, ioff, wo, ostride, ooff, relu, run, fetch, xa, xb):
    """The busy cells of row ``oy`` in ``[xa, xb)``, ``run`` at a time (the last group
    padded with its last cell, computed twice: the same value stored twice). Returns how many
    cells were busy."""
    xs = local(i64, run)
    n = 0
    total = 0
    for ox in range(xa, xb):
        if out_mask[oy * wo + ox] != 0:
            xs[n] = ox
            n += 1
            if fetch:  # issued as the cell joins its group, in flight while the group fills
                for line in unroll(cin // 16):
                    simd.prefetch(inp, (y0 * wi + ox * sx - left) * ps + ioff + line * 16)
            if n == run:
                cell_group(inp, weights, bias, out, oy, xs, y0, ky_lo, ky_hi, cin, cout, chunks,
                           kw, sx, left, row, ps, cs, ioff, wo, ostride, ooff, relu, run)
                total += n
                n = 0
    if n > 0:
        for r in range(n, run):
            xs[r] = xs[n - 1]
        cell_group(inp, weights, bias, out, oy, xs, y0, ky_lo, ky_hi, cin, cout, chunks, kw, sx,
                   left, row, ps, cs, ioff, wo, ostride, ooff, relu, run)
        total += n
    return total


@kernel(name="pillars.bev_conv", fastmath=("contract",))
def bev_conv(
        inp: Buf[f32, In(doc="input map: NHWC (ps floats a cell, channels from ioff) or the NCHW "
                             "canvas", rows="hi * wi * ps")],
        weights: Buf[f32, None, "cpad", In(
            doc="BN-folded weight, [(ky * kw + kx) * cin + ci, co] = W[co, ci, ky, kx], rows "
                "zero-padded to cpad; a slice of the weights blob (native_net.NetPlan.table)",
            rows="kh * kw * cin")],
        bias: Buf[f32, "cpad", In(doc="BN-folded bias, zero-padded")],
        out: Buf[f32, State(doc="output map, cout channels at ooff of each ostride-float cell; "
                                "holds the previous frame on entry; 16 floats of slack at the end",
                            rows="ho * wo * ostride + 16")],
        in_mask: Buf[u8, In(doc="bit 0: the input cell differs from the empty frame's (sparse "
                                "only)", rows="hi * wi")],
        out_mask: Buf[u8, State(doc="bit 0: this frame, bit 1: last frame; initialise to 1 "
                                    "(sparse only)", rows="ho * wo")], *,
        cin: int, cout: int, cpad: int, kh: int, kw: int, sy: int, sx: int, top: int, left: int,
        hi: int, wi: int, ho: int, wo: int, ps: int, cs: int, ioff: int, ostride: int, ooff: int,
        xa: int, xb: int, relu: bool, sparse: bool, run: int, fetch: bool) -> i64:
    computed = 0
    row = wi * ps
    runs = (xb - xa) // run
    for oy in range(ho):
        y0 = oy * sy - top
        ky_lo, ky_hi = max(0, -y0), min(kh, hi - y0)
        busy = 1
        if sparse:
            busy = update_masks(in_mask, out_mask, oy, y0, ky_lo, ky_hi, kw, sx, left, wi, wo)
        if busy != 0:
            # one cell at a time: padding along x, and (dense) the tail after the runs
            end = xb if sparse else xa + runs * run
            for ox in range(wo):
                if (ox < xa) | (ox >= end):
                    if (not sparse) or out_mask[oy * wo + ox] != 0:
                        one_cell(inp, weights, bias, out, oy, ox, y0, ky_lo, ky_hi, cin, cout,
                                 cpad // 16, kw, sx, left, wi, row, ps, cs, ioff, wo, ostride,
                                 ooff, relu)
                        computed += 1
            if sparse:
                computed += busy_groups(inp, weights, bias, out, out_mask, oy, y0, ky_lo, ky_hi,
                                        cin, cout, cpad // 16, kw, sx, left, wi, row, ps, cs,
                                        ioff, wo, ostride, ooff, relu, run, fetch, xa, xb)
            else:
                for k in range(runs):
                    cell_run(inp, weights, bias, out, oy, xa + k * run, y0, ky_lo, ky_hi, cin,
                             cout, cpad // 16, kw, sx, left, wi, row, ps, cs, ioff, wo, ostride,
                             ooff, relu, run, fetch)
                    computed += run
    return computed


def padded(cout: int) -> int:
    """Channels rounded up to whole 16-lane vectors: the weight / bias row length (an odd
    width such as 18 or 42 as one vector value was split into slow partial operations;
    computed on zero-padded rows and stored as the first ``cout`` lanes, 8x faster)."""
    return -(-cout // 16) * 16


def run_length(cout: int, accumulators: int | None = None) -> int:
    """Output cells per run: ACCUMULATORS 16-lane vectors in all with AVX-512 (32 zmm
    registers), half as many where a 16-lane vector takes two or four registers (AVX2's 16 ymm,
    NEON's 32 q), so that the accumulators and a weight row stay in registers; None: as this
    host has them (a library for another CPU passes its own: c_net). The run length changes
    no result: each cell sums its taps in the same order."""
    if accumulators is None:
        accumulators = ACCUMULATORS if host_has("avx512f") else ACCUMULATORS // 2
    return max(1, accumulators // -(-cout // 16))


def bev_conv_spec(*, cin: int, cout: int, kernel: tuple, stride: tuple, pads: tuple,
                  in_size: tuple, out_size: tuple, in_layout: tuple, out_layout: tuple,
                  relu: bool, sparse: bool) -> KernelSpec:
    """The conv kernel for one layer. in_layout: (ps, cs, ioff) as in the module docstring;
    out_layout: (ostride, ooff)."""
    (kh, kw), (sy, sx), (hi, wi), (ho, wo) = kernel, stride, in_size, out_size
    top, left = pads[0], pads[1]
    xa = min(wo, -(-left // sx))  # first cell whose taps are all inside along x
    xb = max(xa, min(wo, (wi - kw + left) // sx + 1))  # one past the last such cell
    return bev_conv.spec(cin=cin, cout=cout, cpad=padded(cout), kh=kh, kw=kw, sy=sy, sx=sx,
                         top=top, left=left, hi=hi, wi=wi, ho=ho, wo=wo, ps=in_layout[0],
                         cs=in_layout[1], ioff=in_layout[2], ostride=out_layout[0],
                         ooff=out_layout[1], xa=xa, xb=xb, relu=bool(relu),
                         sparse=bool(sparse), run=run_length(cout),
                         fetch=kh == kw == 1 and in_layout[1] == 1 and cin >= FETCH_CHANNELS)
