"""The hand-built IR ``pillars.conv_scatter`` that ``cuvil_perception/ops/pillars/kernel_conv_scatter.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.types import ConvLayer
from cuvil_perception.ops.pillars.kernel_conv_scatter import chunks
from cuvil_perception.ops.pillars.signatures import conv_scatter_args

FLAGS = ("contract",)
LANES = 16
WAYS = 4  # independent FMA chains per tap (see _matvec)


def build_conv_scatter(module: ir.Module, fn_name: str, *, cin: int, cout: int, kh: int,
                       kw: int, sy: int, sx: int, top: int, left: int, ho: int,
                       wo: int) -> None:
    fn = ir.Function(module, ir.FunctionType(u.I64, [u.PTR, u.PTR, u.I64] + [u.PTR] * 7),
                     name=fn_name)
    features, coords, count, weights, bias, out, mark, touched, prev, prev_count = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    parts = chunks(cout)
    biases = [u.load_vec(b, bias, off, u.vec(u.F32, width)) for off, width in parts]
    reached = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    geometry = (kh, kw, sy, sx, top, left, ho, wo)
    with u.for_range(b, 0, count, name="p") as p:
        y = b.sext(u.load_at(b, coords, b.add(b.mul(p, u.const_i64(3)), u.const_i64(1)), u.I32),
                   u.I64)
        x = b.sext(u.load_at(b, coords, b.add(b.mul(p, u.const_i64(3)), u.const_i64(2)), u.I32),
                   u.I64)
        row = b.mul(p, u.const_i64(cin))
        with u.for_range(b, 0, kh * kw, name="tap") as tap:
            cell, valid = _tap_cell(b, y, x, tap, geometry)
            with b.if_then(valid):
                acc = _matvec(b, features, row, weights, tap, cin, cout, parts)
                _accumulate(b, acc, out, cell, mark, touched, reached, cout, parts)
    n = b.load(reached)
    relu_bias = [u.fmax(b, v, u.splat(0.0, v.type)) for v in biases]
    previous = u.load_at(b, prev_count, 0, u.I64)
    with u.for_range(b, 0, previous, name="restore") as k:
        cell = b.sext(u.load_at(b, prev, k, u.I32), u.I64)
        idle = b.icmp_unsigned("==", u.load_at(b, mark, cell, u.I8), ir.Constant(u.I8, 0))
        with b.if_then(idle):
            for (off, _), value in zip(parts, relu_bias):
                u.store_vec(b, value, out, b.add(b.mul(cell, u.const_i64(cout)), u.const_i64(off)))
    with u.for_range(b, 0, n, name="finish") as k:
        cell32 = u.load_at(b, touched, k, u.I32)
        cell = b.sext(cell32, u.I64)
        for (off, width), value in zip(parts, biases):
            at = b.add(b.mul(cell, u.const_i64(cout)), u.const_i64(off))
            total = b.fadd(u.load_vec(b, out, at, u.vec(u.F32, width)), value)
            u.store_vec(b, u.fmax(b, total, u.splat(0.0, total.type)), out, at)
        u.store_at(b, ir.Constant(u.I8, 0), mark, cell)
        u.store_at(b, cell32, prev, k)
    u.store_at(b, n, prev_count, 0)
    b.ret(n)


def _tap_cell(b, y, x, tap, geometry) -> tuple[ir.Value, ir.Value]:
    """(output cell index, whether it exists) that input cell (y, x) feeds through ``tap``."""
    kh, kw, sy, sx, top, left, ho, wo = geometry
    ky = b.sdiv(tap, u.const_i64(kw))
    kx = b.srem(tap, u.const_i64(kw))
    oy, valid_y = _axis(b, b.sub(b.add(y, u.const_i64(top)), ky), sy, ho)
    ox, valid_x = _axis(b, b.sub(b.add(x, u.const_i64(left)), kx), sx, wo)
    cell = b.add(b.mul(oy, u.const_i64(wo)), ox)
    return cell, b.and_(valid_y, valid_x)


def _axis(b, shifted, stride: int, size: int) -> tuple[ir.Value, ir.Value]:
    """shifted / stride and whether it is an output index (non-negative, exact, < size)."""
    index = b.sdiv(shifted, u.const_i64(stride))
    exact = b.icmp_signed("==", b.srem(shifted, u.const_i64(stride)), u.const_i64(0))
    inside = b.and_(b.icmp_signed(">=", shifted, u.const_i64(0)),
                    b.icmp_signed("<", index, u.const_i64(size)))
    return index, b.and_(exact, inside)


def _matvec(b, features, row, weights, tap, cin: int, cout: int, parts) -> list:
    """W[tap] @ features[row : row + cin] as one vector per channel chunk.

    Channel ci goes to partial sum ci % ways (ways independent FMA chains per chunk hide the FMA
    latency: one chain of 64 dependent FMAs was latency-bound, 1.4x slower), summed pairwise at
    the end; the order is fixed, so the result is deterministic."""
    ways = max(1, WAYS // len(parts))
    main = cin - cin % ways
    slots = [[u.entry_alloca(b, u.vec(u.F32, width)) for _ in range(ways)] for _, width in parts]
    for chain, (_, width) in zip(slots, parts):
        for slot in chain:
            b.store(u.splat(0.0, u.vec(u.F32, width)), slot)
    base = b.mul(tap, u.const_i64(cin * cout))
    with u.for_range(b, 0, main, step=ways, name="ci") as ci:
        for lane in range(ways):
            _fma_channel(b, features, row, weights, base, b.add(ci, u.const_i64(lane)), cout,
                         parts, [chain[lane] for chain in slots])
    for ci in range(main, cin):
        _fma_channel(b, features, row, weights, base, u.const_i64(ci), cout, parts,
                     [chain[0] for chain in slots])
    return [_pairwise(b, [b.load(slot) for slot in chain]) for chain in slots]


def _fma_channel(b, features, row, weights, base, ci, cout: int, parts, slots) -> None:
    value = u.load_at(b, features, b.add(row, ci), u.F32)
    at = b.add(base, b.mul(ci, u.const_i64(cout)))
    for slot, (off, width) in zip(slots, parts):
        vty = u.vec(u.F32, width)
        w = u.load_vec(b, weights, b.add(at, u.const_i64(off)), vty)
        prod = b.fmul(_splat(b, value, vty), w, flags=FLAGS)
        b.store(b.fadd(b.load(slot), prod, flags=FLAGS), slot)


def _pairwise(b, values: list):
    while len(values) > 1:
        values = [b.fadd(values[k], values[k + 1]) if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def _accumulate(b, acc, out, cell, mark, touched, reached, cout: int, parts) -> None:
    """out[cell] = acc on the cell's first touch this frame (recorded), else out[cell] += acc."""
    first = b.icmp_unsigned("==", u.load_at(b, mark, cell, u.I8), ir.Constant(u.I8, 0))
    base = b.mul(cell, u.const_i64(cout))
    with b.if_else(first) as (then, otherwise):
        with then:
            u.store_at(b, ir.Constant(u.I8, 1), mark, cell)
            n = b.load(reached)
            u.store_at(b, b.trunc(cell, u.I32), touched, n)
            b.store(b.add(n, u.const_i64(1)), reached)
            for value, (off, _) in zip(acc, parts):
                u.store_vec(b, value, out, b.add(base, u.const_i64(off)))
        with otherwise:
            for value, (off, width) in zip(acc, parts):
                at = b.add(base, u.const_i64(off))
                old = u.load_vec(b, out, at, u.vec(u.F32, width))
                u.store_vec(b, b.fadd(old, value), out, at)


def _splat(b, scalar, vty):
    undef = ir.Constant(vty, ir.Undefined)
    one = b.insert_element(undef, scalar, u.const_i32(0))
    return b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, vty.count), [0] * vty.count))


def conv_scatter_spec(config: PillarConfig, conv: ConvLayer) -> KernelSpec:
    """The fused scatter + first-conv kernel for one grid and layer shape (weights at run time)."""
    (cin, cout), (kh, kw) = conv.channels, conv.kernel
    ho, wo = conv.out_size(config.ny, config.nx)
    return KernelSpec(
        name="pillars.conv_scatter", build=build_conv_scatter,
        static={"cin": cin, "cout": cout, "kh": kh, "kw": kw, "sy": conv.stride[0],
                "sx": conv.stride[1], "top": conv.pads[0], "left": conv.pads[1], "ho": ho,
                "wo": wo},
        args=conv_scatter_args(), ret="i64", fastmath=FLAGS, version=2)
