"""The hand-built IR ``pillars.scatter`` that ``cuvil_perception/ops/pillars/kernel_scatter.py``
replaced (all its write orders, and ``mark_and_sort``; same signature and semantics, see that docstring). Kept for
``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.signatures import scatter_args

ORDERS = ("merged", "channel", "pillar")


def build_scatter(module: ir.Module, fn_name: str, *, channels: int, nx: int, ny: int,
                  order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"scatter: order must be one of {ORDERS}, got {order!r}")
    args = [u.PTR, u.PTR, u.I64] + [u.PTR] * 7
    fn = ir.Function(module, ir.FunctionType(u.VOID, args), name=fn_name)
    features, coords, count, bev, prev_cells, prev_count, bitmap, cell_pillar, cells, pids = \
        fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    mark_and_sort(b, coords, count, bitmap, cell_pillar, cells, pids, nx, ny)
    previous = u.load_at(b, prev_count, 0, u.I64)
    plane = nx * ny
    if order == "merged":
        _merged(b, features, bev, prev_cells, previous, cells, pids, count, channels, plane)
    elif order == "channel":
        _channel_outer(b, features, bev, prev_cells, previous, cells, pids, count, channels,
                       plane)
    else:
        _pillar_outer(b, features, bev, prev_cells, previous, cells, pids, count, channels,
                      plane)
    with u.for_range(b, 0, count, name="keep") as i:
        u.store_at(b, u.load_at(b, cells, i, u.I32), prev_cells, i)
    u.store_at(b, count, prev_count, 0)
    b.ret_void()


def mark_and_sort(b, coords, count, bitmap, cell_pillar, cells, pids, nx: int,
                  ny: int) -> None:
    """Fill ``cells[:count]`` with this frame's cells in increasing order and ``pids[:count]``
    with their pillars: mark each cell in ``bitmap`` (and its pillar in ``cell_pillar``), then
    scan the bitmap (left all-zero again)."""
    with u.for_range(b, 0, count, name="mark") as p:
        base = b.mul(p, u.const_i64(3))
        iy = b.sext(u.load_at(b, coords, b.add(base, u.const_i64(1)), u.I32), u.I64)
        ix = b.sext(u.load_at(b, coords, b.add(base, u.const_i64(2)), u.I32), u.I64)
        cell = b.add(b.mul(iy, u.const_i64(nx)), ix)
        u.store_at(b, b.trunc(p, u.I32), cell_pillar, cell)
        word = b.lshr(cell, u.const_i64(6))
        bit = b.shl(u.const_i64(1), b.and_(cell, u.const_i64(63)))
        u.store_at(b, b.or_(u.load_at(b, bitmap, word, u.I64), bit), bitmap, word)
    _collect_sorted(b, bitmap, cell_pillar, cells, pids, (nx * ny + 63) // 64)


def _merged(b, features, bev, prev_cells, previous, cells, pids, count, channels, plane) -> None:
    """Sorted merge of the previous and the new cell lists (see ``"merged"``)."""
    fn = b.function
    i_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    j_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    sentinel = u.const_i64(1 << 40)
    head, body, done = (fn.append_basic_block(n) for n in ("m.head", "m.body", "m.done"))
    b.branch(head)
    b.position_at_end(head)
    i, j = b.load(i_slot), b.load(j_slot)
    more = b.or_(b.icmp_signed("<", i, previous), b.icmp_signed("<", j, count))
    b.cbranch(more, body, done)
    b.position_at_end(body)
    old_cell = _cell_or(b, prev_cells, i, previous, sentinel)
    new_cell = _cell_or(b, cells, j, count, sentinel)
    take_new = b.icmp_signed("<=", new_cell, old_cell)
    with b.if_else(take_new) as (write, clear):
        with write:
            pid = b.sext(u.load_at(b, pids, j, u.I32), u.I64)
            with u.for_range(b, 0, channels, name="wc") as c:
                src = b.add(b.mul(pid, u.const_i64(channels)), c)
                dst = b.add(b.mul(c, u.const_i64(plane)), new_cell)
                u.store_at(b, u.load_at(b, features, src, u.F32), bev, dst)
        with clear:
            with u.for_range(b, 0, channels, name="cc") as c:
                dst = b.add(b.mul(c, u.const_i64(plane)), old_cell)
                u.store_at(b, u.const_f32(0.0), bev, dst)
    one = u.const_i64(1)
    b.store(b.select(take_new, b.add(j, one), j), j_slot)
    advance_old = b.icmp_signed("<=", old_cell, new_cell)
    b.store(b.select(advance_old, b.add(i, one), i), i_slot)
    b.branch(head)
    b.position_at_end(done)


def _cell_or(b, cells, index, limit, sentinel):
    """cells[index] as i64, or ``sentinel`` past ``limit`` (the load is guarded)."""
    inside = b.icmp_signed("<", index, limit)
    safe = b.select(inside, index, u.const_i64(0))
    value = b.sext(u.load_at(b, cells, safe, u.I32), u.I64)
    return b.select(inside, value, sentinel)


def _channel_outer(b, features, bev, prev_cells, previous, cells, pids, count, channels,
                   plane) -> None:
    """Per channel plane: clear last frame's cells, then write this frame's (sorted)."""
    with u.for_range(b, 0, channels, name="c") as c:
        offset = b.mul(c, u.const_i64(plane))
        _clear(b, bev, prev_cells, previous, lambda cell: b.add(offset, cell))
        with u.for_range(b, 0, count, name="w") as i:
            cell = b.sext(u.load_at(b, cells, i, u.I32), u.I64)
            pid = b.sext(u.load_at(b, pids, i, u.I32), u.I64)
            src = b.add(b.mul(pid, u.const_i64(channels)), c)
            u.store_at(b, u.load_at(b, features, src, u.F32), bev, b.add(offset, cell))


def _pillar_outer(b, features, bev, prev_cells, previous, cells, pids, count, channels,
                  plane) -> None:
    """Clear plane by plane, then write each pillar's C channels (sorted by cell)."""
    with u.for_range(b, 0, channels, name="c") as c:
        offset = b.mul(c, u.const_i64(plane))
        _clear(b, bev, prev_cells, previous, lambda cell: b.add(offset, cell))
    with u.for_range(b, 0, count, name="w") as i:
        cell = b.sext(u.load_at(b, cells, i, u.I32), u.I64)
        pid = b.sext(u.load_at(b, pids, i, u.I32), u.I64)
        with u.for_range(b, 0, channels, name="wc") as c:
            src = b.add(b.mul(pid, u.const_i64(channels)), c)
            dst = b.add(b.mul(c, u.const_i64(plane)), cell)
            u.store_at(b, u.load_at(b, features, src, u.F32), bev, dst)


def _clear(b, bev, prev_cells, previous, address) -> None:
    with u.for_range(b, 0, previous, name="clr") as i:
        cell = b.sext(u.load_at(b, prev_cells, i, u.I32), u.I64)
        u.store_at(b, u.const_f32(0.0), bev, address(cell))


def _collect_sorted(b, bitmap, cell_pillar, cells, pids, words: int) -> None:
    """Scan the bitmap in address order, emit (cell, pillar) pairs sorted by cell, zero it."""
    fn = b.function
    cttz = ir.Function(b.module, ir.FunctionType(u.I64, [u.I64, u.I1]), name="llvm.cttz.i64") \
        if "llvm.cttz.i64" not in b.module.globals else b.module.globals["llvm.cttz.i64"]
    written = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    with u.for_range(b, 0, words, name="word") as w:
        bits0 = u.load_at(b, bitmap, w, u.I64)
        head = fn.append_basic_block("bits.head")
        body = fn.append_basic_block("bits.body")
        done = fn.append_basic_block("bits.done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        bits = b.phi(u.I64)
        bits.add_incoming(bits0, pre)
        b.cbranch(b.icmp_unsigned("!=", bits, u.const_i64(0)), body, done)
        b.position_at_end(body)
        bit = b.call(cttz, [bits, ir.Constant(u.I1, 1)])
        cell = b.add(b.shl(w, u.const_i64(6)), bit)
        slot = b.load(written)
        u.store_at(b, b.trunc(cell, u.I32), cells, slot)
        u.store_at(b, u.load_at(b, cell_pillar, cell, u.I32), pids, slot)
        b.store(b.add(slot, u.const_i64(1)), written)
        bits.add_incoming(b.and_(bits, b.sub(bits, u.const_i64(1))), body)
        b.branch(head)
        b.position_at_end(done)
        # Only store when the word had bits: keeps the scan read-only over empty regions.
        nonzero = b.icmp_unsigned("!=", bits0, u.const_i64(0))
        with b.if_then(nonzero):
            u.store_at(b, u.const_i64(0), bitmap, w)


def scatter_spec(config: PillarConfig, order: str = "merged") -> KernelSpec:
    """The scatter kernel for one grid; ``order`` as in the module docstring."""
    return KernelSpec(
        name="pillars.scatter", build=build_scatter,
        static={"channels": config.num_features, "nx": config.nx, "ny": config.ny,
                "order": order},
        args=scatter_args(), ret=None, fastmath=(), version=1)
