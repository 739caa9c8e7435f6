"""Native PillarScatter fused into the first BEV convolution: the layer's output straight from the
[P, C_in] pillar features, never building the [C_in, ny, nx] canvas.

The signature, with units and roles, is the kernel's annotations (C_in = ``cin``, C_out =
``cout``, H_out x W_out = ``ho`` x ``wo``). Semantics (``reference.conv_scatter``): out =
relu(conv2d(scatter(features), W, stride, pads) + b) in NHWC, with the BN-folded weights
``weights[ky*kw + kx, ci, co] = W[co, ci, ky, kx]``. Returns the number of output cells some
pillar reaches this frame.

Why it is cheap: the canvas is ~95 % empty, and an output cell no pillar reaches is
relu(b) whatever the padding. So:

1. per pillar (in pillar order, so the result is deterministic), per tap (ky, kx) whose output
   cell ``o = ((y + top - ky) / sy, (x + left - kx) / sx)`` exists (divisible, inside the map):
   ``acc = W[ky, kx] @ feature`` (C_in x C_out FMAs, vectorised over C_out) and either
   ``out[o] = acc`` (first touch this frame: ``mark[o]`` set, ``o`` appended to ``touched``) or
   ``out[o] += acc``. A stride-2 3x3 layer reaches 2.25 output cells per pillar on average;
2. cells of last frame's list (``prev``) not reached this frame go back to relu(b) (the
   persistent ``out`` is never filled whole, like kernel_scatter_lines' map);
3. bias + ReLU on the reached cells only; marks cleared; ``touched`` becomes ``prev``.

State between calls: ``out`` holds the previous result (relu(b) everywhere before the first call),
``prev[:prev_count]`` the cells it reached; ``mark`` is all-zero on entry and exit. A cell enters
the list once, so the lists (H_out*W_out entries) cannot overflow. One cell's C_out channels are
contiguous (64 bytes for C_out = 16): a touch is one cache line, not C_out strided ones; the
ONNX rest of the network takes the NHWC map through a Transpose (see onnx_sparse).
FMAs are explicit (``kmath.fma``); a cell's C_out channels are one vector value
(``out[cell, :]``, ``weights[tap, ci, :]``), so the partial sums stay in registers.
"""

from __future__ import annotations

from ...compile import KernelSpec
from ...compile.lang import (Buf, In, Scratch, State, f32, i32, i64, inline, kernel, kmath,
                             local, simd, u8, unroll)
from .config import PillarConfig
from .types import ConvLayer

LANES = 16
WAYS = 4  # independent FMA chains per tap (one chain of 64 dependent FMAs was latency-bound)


def chunks(channels: int) -> list[tuple[int, int]]:
    """(offset, width) vector chunks covering ``channels``: 16 lanes, then the tail."""
    return [(c, min(LANES, channels - c)) for c in range(0, channels, LANES)]


@inline
def axis(shifted, stride, size):
    """(shifted / stride, whether it is an output index: non-negative, exact, < size)."""
    index = shifted // stride
    return index, (shifted >= 0) & (shifted % stride == 0) & (index < size)


@inline
def matvec(features, p, weights, tap, cin, cout, ways):
    """W[tap] @ features[p], a vector of C_out: channel ci into chain ci % ways (the rest into
    chain 0; chain w is the row ``acc[w, :]``, zeros at the start), the chains summed pairwise
    at the end; the order is fixed, so the result is deterministic."""
    acc = local(f32, ways, cout)
    main = cin - cin % ways
    for ci in range(0, main, ways):
        for w in unroll(ways):
            acc[w, :] = kmath.fma(features[p, ci + w], weights[tap, ci + w, :], acc[w, :])
    for ci in range(main, cin):
        acc[0, :] = kmath.fma(features[p, ci], weights[tap, ci, :], acc[0, :])
    if ways == 4:
        return (acc[0, :] + acc[1, :]) + (acc[2, :] + acc[3, :])
    if ways == 2:
        return acc[0, :] + acc[1, :]
    return acc[0, :]


@kernel(name="pillars.conv_scatter")
def conv_scatter(
        features: Buf[f32, None, "cin", In(doc="PFN output", rows="count")],
        coords: Buf[i32, None, 3, In("cells (z, y, x)", rows="count")],
        count: i64[In("pillars")],
        weights: Buf[f32, None, "cin", "cout", In(
            doc="BN-folded conv weight, [ky * kw + kx, ci, co] = W[co, ci, ky, kx]",
            rows="kh * kw")],
        bias: Buf[f32, "cout", In(doc="BN-folded bias")],
        out: Buf[f32, None, "cout", State(
            doc="relu(conv + bias), NHWC; holds the previous frame on entry (relu(bias) "
                "everywhere before the first call)", shape=("ho", "wo", "cout"))],
        mark: Buf[u8, State(doc="all zero on entry and exit", rows="ho * wo")],
        touched: Buf[i32, Scratch("cells", rows="ho * wo")],
        prev: Buf[i32, State("cells", "the output cells the previous frame reached",
                             rows="ho * wo")],
        prev_count: Buf[i64, 1, State("cells", "zero-initialise")], *, cin: int, cout: int,
        kh: int, kw: int, sy: int, sx: int, top: int, left: int, ho: int, wo: int,
        ways: int) -> i64:
    reached = 0
    for p in range(count):
        y, x = i64(coords[p, 1]), i64(coords[p, 2])
        for tap in range(kh * kw):
            oy, valid_y = axis(y + top - tap // kw, sy, ho)
            ox, valid_x = axis(x + left - tap % kw, sx, wo)
            if valid_y & valid_x:
                cell = oy * wo + ox
                total = matvec(features, p, weights, tap, cin, cout, ways)
                first = mark[cell] == 0  # first touch this frame: recorded, stored
                if first:
                    mark[cell], touched[reached] = 1, cell
                    reached += 1
                # branch-free: a first touch ignores the stale value
                out[cell, :] = simd.select(first, total, out[cell, :] + total)
    # last frame's cells not reached: back to relu(b); max(0, x) is x where x > 0, else +0.0
    # (NaN and -0.0 too): the operand order matters
    for k in range(prev_count[0]):
        cell = i64(prev[k])
        if mark[cell] == 0:
            out[cell, :] = simd.max(0.0, bias[:])
    for k in range(reached):  # bias + ReLU on the reached cells; marks cleared; touched -> prev
        cell = i64(touched[k])
        out[cell, :] = simd.max(0.0, out[cell, :] + bias[:])
        mark[cell], prev[k] = 0, cell
    prev_count[0] = reached
    return reached


def conv_scatter_spec(config: PillarConfig, conv: ConvLayer) -> KernelSpec:
    """The fused scatter + first-conv kernel for one grid and layer shape (weights at run time)."""
    (cin, cout), (kh, kw) = conv.channels, conv.kernel
    ho, wo = conv.out_size(config.ny, config.nx)
    return conv_scatter.spec(cin=cin, cout=cout, kh=kh, kw=kw, sy=conv.stride[0],
                             sx=conv.stride[1], top=conv.pads[0], left=conv.pads[1], ho=ho, wo=wo,
                             ways=max(1, WAYS // len(chunks(cout))))
