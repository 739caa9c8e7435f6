"""Native pillarize: one pass over the points with a persistent grid -> pillar-id map.

Signature::

    void pillarize(ptr points f32[n, 4], i64 n,
                   ptr voxels f32[P, K, 4], ptr coords i32[P, 3], ptr num_points i32[P],
                   ptr counts i64[5], ptr grid i32[ny * nx], ptr overflow i32[ny * nx])

Semantics are ``reference.pillarize``. The output buffers are persistent: on entry they hold the
previous frame (``counts[0]`` pillars), and only what that frame wrote is cleared (its pillars'
filled rows, coords and counts), so a frame costs O(points), not O(P * K). ``grid`` must be -1
everywhere on entry and is -1 everywhere on exit: only the cells touched this frame (the kept
pillars' cells and the overflowing cells listed in ``overflow``) are reset. -2 marks a cell whose
pillar did not fit (an int16 grid, half the footprint, measured no faster). No fast-math: the
cell of a point is trunc((p - min) / voxel) with IEEE float32 subtract and divide, exactly what
numpy computes.
"""

from __future__ import annotations

from llvmlite import ir

from ...compile import KernelSpec, irutil as u
from .config import PillarConfig
from .types import COUNT, DROPPED_PILLARS, DROPPED_POINTS, INVALID_POINTS, OUT_OF_RANGE


def build_pillarize(module: ir.Module, fn_name: str, *, rng: list, voxel: list, nx: int,
                    ny: int, max_pillars: int, max_points: int) -> None:
    args = [u.PTR, u.I64] + [u.PTR] * 6
    fn = ir.Function(module, ir.FunctionType(u.VOID, args), name=fn_name)
    points, n, voxels, coords, num_points, counts, grid, overflow = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = _Ctx(b, rng, voxel, nx, ny, max_pillars, max_points, voxels, coords, num_points,
               grid, overflow)
    _clear_previous(ctx, u.load_at(b, counts, COUNT, u.I64))
    tallies = {k: u.entry_alloca(b, u.I64, init=u.const_i64(0)) for k in range(5)}
    n_over = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    with u.for_range(b, 0, n, name="pt") as i:
        _one_point(ctx, points, i, tallies, n_over)
    count = b.load(tallies[COUNT])
    with u.for_range(b, 0, count, name="reset") as p:
        u.store_at(b, u.const_i32(-1), grid, _cell_of_pillar(ctx, p))
    with u.for_range(b, 0, b.load(n_over), name="reset_over") as k:
        cell = b.sext(u.load_at(b, overflow, k, u.I32), u.I64)
        u.store_at(b, u.const_i32(-1), grid, cell)
    for k in range(5):
        u.store_at(b, b.load(tallies[k]), counts, k)
    b.ret_void()


class _Ctx:
    """The builder and the constants one kernel instance bakes in."""

    def __init__(self, b, rng, voxel, nx, ny, max_pillars, max_points, voxels, coords,
                 num_points, grid, overflow):
        self.b, self.nx, self.ny = b, nx, ny
        self.low = [u.const_f32(v) for v in rng[:3]]
        self.high = [u.const_f32(v) for v in rng[3:]]
        self.size = [u.const_f32(v) for v in voxel[:2]]
        self.max_pillars, self.max_points = max_pillars, max_points
        self.voxels, self.coords, self.num_points = voxels, coords, num_points
        self.grid, self.overflow = grid, overflow


def _cell_of_pillar(ctx: _Ctx, p: ir.Value) -> ir.Value:
    b = ctx.b
    base = b.mul(p, u.const_i64(3))
    iy = b.sext(u.load_at(b, ctx.coords, b.add(base, u.const_i64(1)), u.I32), u.I64)
    ix = b.sext(u.load_at(b, ctx.coords, b.add(base, u.const_i64(2)), u.I32), u.I64)
    return b.add(b.mul(iy, u.const_i64(ctx.nx)), ix)


def _clear_previous(ctx: _Ctx, previous: ir.Value) -> None:
    """Zero what the previous frame wrote: filled voxel rows, coords, num_points."""
    b = ctx.b
    zero4 = ir.Constant(u.vec(u.F32, 4), [0.0] * 4)
    with u.for_range(b, 0, previous, name="clear") as p:
        filled = b.sext(u.load_at(b, ctx.num_points, p, u.I32), u.I64)
        row0 = b.mul(p, u.const_i64(ctx.max_points))
        with u.for_range(b, 0, filled, name="clear_row") as k:
            b.store(zero4, u.gep(b, ctx.voxels, b.add(row0, k), zero4.type), align=4)
        u.store_at(b, u.const_i32(0), ctx.num_points, p)
        for axis in range(3):
            u.store_at(b, u.const_i32(0), ctx.coords, b.add(b.mul(p, u.const_i64(3)),
                                                           u.const_i64(axis)))


def _one_point(ctx: _Ctx, points, i, tallies, n_over) -> None:
    b = ctx.b
    fn = b.function
    done = fn.append_basic_block("pt.done")
    vals = [u.load_at(b, points, b.add(b.mul(i, u.const_i64(4)), u.const_i64(c)), u.F32)
            for c in range(4)]
    # v - v is 0 for finite v and NaN for NaN or inf; the sum is 0 iff all four are finite.
    diff = [b.fsub(v, v) for v in vals]
    total = b.fadd(b.fadd(diff[0], diff[1]), b.fadd(diff[2], diff[3]))
    _branch_count(b, b.fcmp_ordered("==", total, u.const_f32(0.0)), tallies[INVALID_POINTS], done)
    inside = None
    for axis in range(3):
        ok = b.and_(b.fcmp_ordered(">=", vals[axis], ctx.low[axis]),
                    b.fcmp_ordered("<", vals[axis], ctx.high[axis]))
        inside = ok if inside is None else b.and_(inside, ok)
    _branch_count(b, inside, tallies[OUT_OF_RANGE], done)
    ix = _axis_cell(ctx, vals[0], 0, ctx.nx)
    iy = _axis_cell(ctx, vals[1], 1, ctx.ny)
    cell = b.add(b.mul(iy, u.const_i64(ctx.nx)), ix)
    pillar = _pillar_of(ctx, cell, ix, iy, tallies, n_over, done)
    filled = u.load_at(b, ctx.num_points, pillar, u.I32)
    has_room = b.icmp_signed("<", filled, u.const_i32(ctx.max_points))
    _branch_count(b, has_room, tallies[DROPPED_POINTS], done)
    row = b.add(b.mul(pillar, u.const_i64(ctx.max_points)), b.sext(filled, u.I64))
    packed = ir.Constant(u.vec(u.F32, 4), ir.Undefined)
    for c in range(4):
        packed = b.insert_element(packed, vals[c], u.const_i32(c))
    b.store(packed, u.gep(b, ctx.voxels, row, packed.type), align=4)
    u.store_at(b, b.add(filled, u.const_i32(1)), ctx.num_points, pillar)
    b.branch(done)
    b.position_at_end(done)


def _branch_count(b: ir.IRBuilder, ok: ir.Value, tally, done) -> None:
    """Continue when ``ok``; else add one to ``tally`` and jump to ``done``."""
    good = b.function.append_basic_block("ok")
    bad = b.function.append_basic_block("bad")
    b.cbranch(ok, good, bad)
    b.position_at_end(bad)
    b.store(b.add(b.load(tally), u.const_i64(1)), tally)
    b.branch(done)
    b.position_at_end(good)


def _axis_cell(ctx: _Ctx, value, axis: int, cells: int) -> ir.Value:
    """trunc((value - min) / voxel) clamped to cells - 1, as i64."""
    b = ctx.b
    ratio = b.fdiv(b.fsub(value, ctx.low[axis]), ctx.size[axis])
    index = b.fptosi(ratio, u.I64)
    top = u.const_i64(cells - 1)
    return b.select(b.icmp_signed(">", index, top), top, index)


def _pillar_of(ctx: _Ctx, cell, ix, iy, tallies, n_over, done) -> ir.Value:
    """The pillar id of ``cell`` (allocating the next one on first sight), as i64.

    A cell seen when the budget is full is marked -2, listed in ``overflow`` and counted; its
    points jump to ``done`` as dropped."""
    b = ctx.b
    fn = b.function
    current = u.load_at(b, ctx.grid, cell, u.I32)
    known, known_ok, drop, new, merge = (fn.append_basic_block(n) for n in (
        "known", "known_ok", "drop_known", "new", "have_pillar"))
    b.cbranch(b.icmp_signed("==", current, u.const_i32(-1)), new, known)
    b.position_at_end(known)
    b.cbranch(b.icmp_signed("==", current, u.const_i32(-2)), drop, known_ok)
    b.position_at_end(drop)
    _bump(b, tallies[DROPPED_POINTS])
    b.branch(done)
    b.position_at_end(known_ok)
    known_id = b.sext(current, u.I64)
    b.branch(merge)
    b.position_at_end(new)
    count, alloc = _allocate(ctx, cell, ix, iy, tallies, n_over, done)
    b.branch(merge)
    b.position_at_end(merge)
    pillar = b.phi(u.I64, name="pillar")
    pillar.add_incoming(known_id, known_ok)
    pillar.add_incoming(count, alloc)
    return pillar


def _allocate(ctx: _Ctx, cell, ix, iy, tallies, n_over, done):
    """First sight of ``cell``: take the next pillar id if the budget allows (returns it and the
    block it was taken in), else mark the cell -2, list it in ``overflow`` and jump to done."""
    b = ctx.b
    alloc = b.function.append_basic_block("alloc")
    full = b.function.append_basic_block("full")
    count = b.load(tallies[COUNT])
    b.cbranch(b.icmp_signed("<", count, u.const_i64(ctx.max_pillars)), alloc, full)
    b.position_at_end(full)
    u.store_at(b, u.const_i32(-2), ctx.grid, cell)
    slot = b.load(n_over)
    u.store_at(b, b.trunc(cell, u.I32), ctx.overflow, slot)
    b.store(b.add(slot, u.const_i64(1)), n_over)
    _bump(b, tallies[DROPPED_PILLARS])
    _bump(b, tallies[DROPPED_POINTS])
    b.branch(done)
    b.position_at_end(alloc)
    u.store_at(b, b.trunc(count, u.I32), ctx.grid, cell)
    base = b.mul(count, u.const_i64(3))
    u.store_at(b, u.const_i32(0), ctx.coords, base)
    u.store_at(b, b.trunc(iy, u.I32), ctx.coords, b.add(base, u.const_i64(1)))
    u.store_at(b, b.trunc(ix, u.I32), ctx.coords, b.add(base, u.const_i64(2)))
    b.store(b.add(count, u.const_i64(1)), tallies[COUNT])
    return count, b.block


def _bump(b: ir.IRBuilder, slot) -> None:
    b.store(b.add(b.load(slot), u.const_i64(1)), slot)


def pillarize_spec(config: PillarConfig) -> KernelSpec:
    """The pillarize kernel for one grid."""
    return KernelSpec(
        name="pillars.pillarize", build=build_pillarize,
        static={"rng": list(config.point_cloud_range), "voxel": list(config.voxel_size),
                "nx": config.nx, "ny": config.ny, "max_pillars": config.max_pillars,
                "max_points": config.max_points_per_pillar},
        args=("ptr", "i64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"), ret=None,
        fastmath=(), version=2)
