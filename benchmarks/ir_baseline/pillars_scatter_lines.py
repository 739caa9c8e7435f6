"""The hand-built IR ``pillars.scatter_lines`` that ``cuvil_perception/ops/pillars/kernel_scatter_lines.py``
replaced (``stream`` and ``lines``; same signature and semantics, see that docstring). Kept for
``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.signatures import scatter_lines_args
from .pillars_scatter import mark_and_sort

LANES = 16  # floats per 64-byte cache line; also channels per chunk


def build_scatter_lines(module: ir.Module, fn_name: str, *, channels: int, nx: int, ny: int,
                        max_pillars: int, stream: bool) -> None:
    if channels % LANES:
        raise ValueError(f"scatter_lines: channels {channels} must be a multiple of {LANES}")
    if (nx * ny) % LANES:
        raise ValueError(f"scatter_lines: nx * ny = {nx * ny} must be a multiple of {LANES}")
    fn = ir.Function(module, ir.FunctionType(u.VOID, [u.PTR, u.PTR, u.I64] + [u.PTR] * 11),
                     name=fn_name)
    (features, coords, count, bev, prev_lines, prev_count, bitmap, cell_pillar, cells, pids,
     union_lines, union_ends, gathered, rank) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    mark_and_sort(b, coords, count, bitmap, cell_pillar, cells, pids, nx, ny)
    previous = u.load_at(b, prev_count, 0, u.I64)
    n_union = _merge(b, prev_lines, previous, cells, count, union_lines, union_ends)
    _keep_lines(b, union_lines, union_ends, n_union, prev_lines, prev_count)
    _gather(b, features, pids, rank, count, gathered, channels, max_pillars)
    store = _LineStore(b, bev, nx * ny, stream)
    with u.for_range(b, 0, channels, step=LANES, name="chunk") as c0:
        start = u.entry_alloca(b, u.I64)
        b.store(u.const_i64(0), start)
        chunk = u.gep(b, gathered, b.mul(c0, u.const_i64(max_pillars)), u.F32)
        with u.for_range(b, 0, n_union, name="line") as k:
            line = b.sext(u.load_at(b, union_lines, k, u.I32), u.I64)
            end = b.sext(u.load_at(b, union_ends, k, u.I32), u.I64)
            values = _compose(b, chunk, cells, b.load(start), end)
            for lane, value in enumerate(values):
                store.put(value, b.add(c0, u.const_i64(lane)), line)
            b.store(end, start)
    if stream:
        b.fence("seq_cst")  # orders the streaming stores before any later load (mfence on x86)
    b.ret_void()


class _LineStore:
    """Stores one composed line vector into one channel plane."""

    def __init__(self, b, bev, plane: int, stream: bool):
        self.b, self.bev, self.plane = b, bev, plane
        self.nontemporal = b.module.add_metadata([u.const_i32(1)]) if stream else None

    def put(self, value, channel, line) -> None:
        b = self.b
        index = b.add(b.mul(channel, u.const_i64(self.plane)), b.mul(line, u.const_i64(LANES)))
        inst = b.store(value, u.gep(b, self.bev, index, u.F32), align=64)
        if self.nontemporal is not None:
            inst.set_metadata("nontemporal", self.nontemporal)


def _merge(b, prev_lines, previous, cells, count, union_lines, union_ends) -> ir.Value:
    """Sorted union of last frame's lines and this frame's cells' lines; for union entry k,
    this frame's cells in it are ``cells[union_ends[k-1]:union_ends[k]]`` (0 for k = 0).
    Returns the number of entries."""
    fn = b.function
    i_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    j_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    n_slot = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    sentinel = u.const_i64(1 << 40)
    head, body, done = (fn.append_basic_block(n) for n in ("u.head", "u.body", "u.done"))
    b.branch(head)
    b.position_at_end(head)
    i, j = b.load(i_slot), b.load(j_slot)
    more = b.or_(b.icmp_signed("<", i, previous), b.icmp_signed("<", j, count))
    b.cbranch(more, body, done)
    b.position_at_end(body)
    old_line = _value_or(b, prev_lines, i, previous, sentinel)
    new_line = b.ashr(_value_or(b, cells, j, count, sentinel), u.const_i64(4))
    line = b.select(b.icmp_signed("<", new_line, old_line), new_line, old_line)
    b.store(b.select(b.icmp_signed("==", old_line, line), b.add(i, u.const_i64(1)), i), i_slot)
    end = _group_end(b, cells, j, count, line)
    b.store(end, j_slot)
    slot = b.load(n_slot)
    u.store_at(b, b.trunc(line, u.I32), union_lines, slot)
    u.store_at(b, b.trunc(end, u.I32), union_ends, slot)
    b.store(b.add(slot, u.const_i64(1)), n_slot)
    b.branch(head)
    b.position_at_end(done)
    return b.load(n_slot)


def _value_or(b, array, index, limit, sentinel):
    """array[index] (i32) as i64, or ``sentinel`` past ``limit`` (the load is guarded)."""
    inside = b.icmp_signed("<", index, limit)
    safe = b.select(inside, index, u.const_i64(0))
    return b.select(inside, b.sext(u.load_at(b, array, safe, u.I32), u.I64), sentinel)


def _group_end(b, cells, start, count, line):
    """First index >= start whose cell is not in ``line`` (at most 16 steps)."""
    fn = b.function
    head, step, done = (fn.append_basic_block(n) for n in ("g.head", "g.step", "g.done"))
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(u.I64, name="k")
    k.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", k, count), step, done)
    b.position_at_end(step)
    cell_line = b.ashr(b.sext(u.load_at(b, cells, k, u.I32), u.I64), u.const_i64(4))
    k.add_incoming(b.add(k, u.const_i64(1)), step)
    b.cbranch(b.icmp_signed("==", cell_line, line), head, done)
    b.position_at_end(done)
    end = b.phi(u.I64, name="group_end")
    end.add_incoming(k, head)
    end.add_incoming(k, step)
    return end


def _keep_lines(b, union_lines, union_ends, n_union, prev_lines, prev_count) -> None:
    """prev_lines = the union lines that hold a cell of this frame (next frame's clear list).

    Every entry is stored, the slot advancing only past kept ones (no branch; hence the one
    spare slot of ``prev_lines``)."""
    kept = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    start = u.entry_alloca(b, u.I32, init=u.const_i32(0))
    with u.for_range(b, 0, n_union, name="keep") as k:
        end = u.load_at(b, union_ends, k, u.I32)
        slot = b.load(kept)
        u.store_at(b, u.load_at(b, union_lines, k, u.I32), prev_lines, slot)
        b.store(b.add(slot, b.zext(b.icmp_signed(">", end, b.load(start)), u.I64)), kept)
        b.store(end, start)
    u.store_at(b, b.load(kept), prev_count, 0)


def _gather(b, features, pids, rank, count, gathered, channels: int, max_pillars: int) -> None:
    """gathered[q, j, :] = features[pids[j], 16q:16q+16] for j < count (64-byte moves), read
    in pillar order through ``rank`` (the inverse of ``pids``)."""
    vty = u.vec(u.F32, LANES)
    with u.for_range(b, 0, count, name="rank") as j:
        u.store_at(b, b.trunc(j, u.I32), rank, b.sext(u.load_at(b, pids, j, u.I32), u.I64))
    with u.for_range(b, 0, count, name="gather") as p:
        at = b.mul(b.sext(u.load_at(b, rank, p, u.I32), u.I64), u.const_i64(LANES))
        for c0 in range(0, channels, LANES):
            value = u.load_vec(b, features, b.add(b.mul(p, u.const_i64(channels)),
                                                  u.const_i64(c0)), vty)
            u.store_vec(b, value, gathered, b.add(at, u.const_i64(c0 * max_pillars)))


def _compose(b, chunk, cells, start, end) -> list:
    """The 16 line vectors of one chunk of channels for one line: zeros, with the features of
    the sorted pillars ``start..end`` (``chunk[j]``: their 16 values) in their cells' lanes."""
    vty = u.vec(u.F32, LANES)
    lanes = ir.Constant(u.vec(u.I32, LANES), list(range(LANES)))
    accs = [u.entry_alloca(b, vty) for _ in range(LANES)]
    for acc in accs:
        b.store(ir.Constant(vty, [0.0] * LANES), acc)
    with u.for_range(b, start, end, name="pillar") as t:
        lane = b.and_(u.load_at(b, cells, t, u.I32), u.const_i32(LANES - 1))
        hit = b.icmp_signed("==", lanes, _splat(b, lane, LANES))
        row = u.load_vec(b, chunk, b.mul(t, u.const_i64(LANES)), vty)
        for k, acc in enumerate(accs):
            spread = b.shuffle_vector(row, ir.Constant(vty, ir.Undefined),
                                      ir.Constant(u.vec(u.I32, LANES), [k] * LANES))
            b.store(b.select(hit, spread, b.load(acc)), acc)
    return [b.load(acc) for acc in accs]


def _splat(b, scalar, lanes: int):
    undef = ir.Constant(u.vec(scalar.type, lanes), ir.Undefined)
    one = b.insert_element(undef, scalar, u.const_i32(0))
    return b.shuffle_vector(one, undef, ir.Constant(u.vec(u.I32, lanes), [0] * lanes))


def lines_fit(config: PillarConfig) -> bool:
    """Whether this kernel can serve the grid: whole channel chunks and whole lines."""
    return config.num_features % LANES == 0 and (config.nx * config.ny) % LANES == 0


def scatter_lines_spec(config: PillarConfig, stream: bool = True) -> KernelSpec:
    """The whole-line scatter kernel for one grid (``stream``: non-temporal stores)."""
    return KernelSpec(
        name="pillars.scatter_lines", build=build_scatter_lines,
        static={"channels": config.num_features, "nx": config.nx, "ny": config.ny,
                "max_pillars": config.max_pillars, "stream": stream},
        args=scatter_lines_args(), ret=None, fastmath=(), version=2)
